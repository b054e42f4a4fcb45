set terminal pngcairo size 800,500
set output '/work/main/docs/bench/drain.png'
set title 'Multi-process drain (10000 items, mode plain)'
set xlabel 'worker processes'; set ylabel 'items/s'; set logscale x 2; set grid
plot for [i=0:2] '/work/main/docs/bench/drain.dat' index i using 1:2 with linespoints title columnheader(1)
set output '/work/main/docs/bench/depth.png'
set title 'Claim + finish cost against queue depth'
set xlabel 'items queued'; set ylabel 'microseconds per item'; set logscale x 10; unset logscale y; set yrange [0:*]
plot '/work/main/docs/bench/depth.dat' using 1:2 with linespoints title 'us per item'
