// The worker's loop of README.md, as a program: a worker drains a project,
// heartbeating between steps and reporting under its fence; a second worker
// that stalled past its lease is refused when it reports late. The function
// between the include and main is the block in the README (ctest checks
// they stay equal). Exits non-zero if anything is off.
//   usage: cplane-example-worker-loop DB_PATH
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>

#include <cplane/cplane.hpp>

namespace {
int steps_done = 0;
void do_step(const std::string& payload, int step) { steps_done += !payload.empty() && step >= 0; }
}  // namespace

// Claims items until none is left; each is done in three steps, under a
// lease renewed between them. A refusal means the lease lapsed and another
// worker holds the item now (or it ended): drop the result, never retry it.
int work(cplane::ControlStore& store, const std::string& me) {
  int done = 0;
  while (auto item = store.claim(me, {.lease = cplane::Seconds{300}})) {
    try {
      for (int step = 0; step < 3; ++step) {
        do_step(item->payload, step);
        store.heartbeat(item->item_id, item->fence, {.lease = cplane::Seconds{300}});
      }
      store.finish(item->item_id, item->fence, cplane::Outcome::done);
      ++done;
    } catch (const cplane::FenceRejected& e) {
      std::cerr << item->item_id << ": " << cplane::to_string(e.reason()) << '\n';
    }
  }
  return done;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " DB_PATH\n";
    return 2;
  }
  std::remove(argv[1]);
  cplane::ControlStore store{argv[1]};
  store.create_project("alpha", "Project Alpha");
  for (int i = 0; i < 5; ++i) store.enqueue("alpha", R"({"n": )" + std::to_string(i) + "}");

  // A stale worker: it claims with a 50 ms lease and stalls past it.
  auto stale = store.claim("stale", {.lease = cplane::Seconds{0.05}});
  if (!stale) return 1;
  std::this_thread::sleep_for(std::chrono::milliseconds{100});

  // The lease has lapsed by now: the loop reclaims that item too.
  if (work(store, "worker-1") != 5 || steps_done != 15) return 1;
  try {
    store.finish(stale->item_id, stale->fence, cplane::Outcome::done);
    return 1;
  } catch (const cplane::FenceRejected& e) {
    if (e.reason() != cplane::FenceRejected::Reason::terminal) return 1;
  }
  if (!cplane::verify_ledger(store).empty()) return 1;
  std::cout << "ok: 5 items done, the stale report refused, the ledger verifies\n";
  return 0;
}
