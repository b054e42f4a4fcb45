// The PostgreSQL peer baselines in batches: pg-boss's batch fetch and
// graphile-worker's batched mode, draining a fresh queue with worker
// processes on the server --url names (a database of their own). Run by
// compare-postgres.sh, which installs both into a temporary folder and
// points NODE_PATH at it.
//
//   node pg-queues-drain.mjs --system pg-boss|graphile-worker --url URL
//                            [--workers 16] [--items 10000] [--batch 32]
//
// pg-boss: the parent creates the queue and inserts the jobs (untimed);
// each worker, once all have connected and the start gate opens, loops
// fetch(batchSize) then complete(those ids) until a fetch comes back empty.
// graphile-worker: each worker runs a runner with concurrency --batch, a
// local queue of --batch jobs fetched at once and completions batched
// (completeJobBatchDelay 0); the parent starts the clock when every runner
// is up and idle, then adds the jobs in one addJobs call (timed: its runners
// start on the first of them), and stops the clock when no job is left.
// Prints one JSON line; exits 1 unless every job was run once.
import { fork } from "node:child_process";
import path from "node:path";
import process from "node:process";

const modules = process.env.NODE_PATH ?? "";
const load = async (name, file) => import(path.join(modules, name, file));

function option(name, fallback) {
  const at = process.argv.indexOf(`--${name}`);
  return at >= 0 ? process.argv[at + 1] : fallback;
}
const system = option("system");
const url = option("url");
const workers = Number(option("workers", "16"));
const items = Number(option("items", "10000"));
const batch = Number(option("batch", "32"));
const kQueue = "bench";
const payload = { task: "benchmark item" };
const quietLogger = (level, message) => {
  if (level === "error") console.error(message);
};

async function pgBossWorker() {
  const { PgBoss } = await load("pg-boss", "dist/index.js");
  const boss = new PgBoss({ connectionString: url, max: 1, supervise: false, schedule: false, migrate: false });
  boss.on("error", (error) => console.error(error));
  await boss.start();
  process.on("message", async (message) => {
    if (message !== "go") return;
    let claims = 0;
    for (;;) {
      const jobs = await boss.fetch(kQueue, { batchSize: batch });
      if (jobs.length === 0) break;
      claims += jobs.length;
      await boss.complete(kQueue, jobs.map((job) => job.id));
    }
    await boss.stop({ graceful: false, wait: true });
    process.send({ claims }, () => process.exit(0));
  });
  process.send("ready");
}

async function graphileWorker() {
  const { run, Logger } = await load("graphile-worker", "dist/index.js");
  let claims = 0;
  const runner = await run({
    connectionString: url,
    concurrency: batch,
    maxPoolSize: 2,
    noHandleSignals: true,
    logger: new Logger(() => quietLogger),
    taskList: {
      [kQueue]: async () => {
        ++claims;
      },
    },
    preset: { worker: { localQueue: { size: batch }, completeJobBatchDelay: 0 } },
  });
  process.on("message", async (message) => {
    if (message !== "stop") return;
    await runner.stop();
    process.send({ claims }, () => process.exit(0));
  });
  process.send("ready");
}

async function pgClient() {
  const { default: pg } = await load("pg", "lib/index.js");
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  return client;
}

// Forks the workers, calls `started` when all are ready, and resolves with
// their records once `finish` has told them to end and all have exited.
function fleet(started) {
  const children = [];
  const records = [];
  return new Promise((resolve, reject) => {
    let ready = 0;
    let exited = 0;
    for (let w = 0; w < workers; ++w) {
      const child = fork(process.argv[1], ["--worker", ...process.argv.slice(2)], { env: process.env });
      child.on("message", (message) => {
        if (message === "ready") {
          if (++ready === workers) started(children).catch(reject);
        } else {
          records.push(message);
        }
      });
      child.on("exit", (code) => {
        if (code !== 0) reject(new Error(`worker ${w} exited with ${code}`));
        if (++exited === workers) resolve(records);
      });
      children.push(child);
    }
  });
}

async function parent() {
  if (!url || !["pg-boss", "graphile-worker"].includes(system) || !(workers > 0) || !(items > 0)) {
    console.error("usage: node pg-queues-drain.mjs --system pg-boss|graphile-worker --url URL [--workers N] [--items N] [--batch N]");
    process.exit(2);
  }
  let t0 = 0;
  let t1 = 0;
  let left = -1;
  let records;
  if (system === "pg-boss") {
    const { PgBoss } = await load("pg-boss", "dist/index.js");
    const boss = new PgBoss({ connectionString: url, max: 2, supervise: false, schedule: false });
    boss.on("error", (error) => console.error(error));
    await boss.start();
    await boss.createQueue(kQueue);
    for (let done = 0; done < items; done += 1000) {
      await boss.insert(kQueue, new Array(Math.min(1000, items - done)).fill({ data: payload }));
    }
    records = await fleet(async (children) => {
      t0 = performance.now();
      for (const c of children) c.send("go");
    });
    t1 = performance.now();
    const client = await pgClient();
    left = Number(
      (await client.query("SELECT count(*) AS n FROM pgboss.job WHERE name = $1 AND state <> 'completed'", [kQueue]))
        .rows[0].n,
    );
    await client.end();
    await boss.stop({ graceful: false, wait: true });
  } else {
    const { runMigrations, makeWorkerUtils } = await load("graphile-worker", "dist/index.js");
    await runMigrations({ connectionString: url });
    const utils = await makeWorkerUtils({ connectionString: url });
    const client = await pgClient();
    const remaining = async () =>
      Number((await client.query("SELECT count(*) AS n FROM graphile_worker._private_jobs")).rows[0].n);
    records = await fleet(async (children) => {
      t0 = performance.now();
      await utils.addJobs(Array.from({ length: items }, () => ({ identifier: kQueue, payload })));
      while ((left = await remaining()) > 0) await new Promise((r) => setTimeout(r, 10));
      t1 = performance.now();
      for (const c of children) c.send("stop");
    });
    await client.end();
    await utils.release();
  }
  const seconds = (t1 - t0) / 1e3;
  const claims = records.map((r) => r.claims);
  const total = claims.reduce((a, b) => a + b, 0);
  const ok = records.length === workers && total === items && left === 0;
  console.log(
    JSON.stringify({
      system,
      store: "postgresql",
      workers,
      batch,
      items: total,
      seconds: Number(seconds.toFixed(3)),
      items_per_s: Math.round(total / seconds),
      min_claims: Math.min(...claims),
      max_claims: Math.max(...claims),
      ok,
    }),
  );
  process.exit(ok ? 0 : 1);
}

if (process.argv.includes("--worker")) {
  await (system === "pg-boss" ? pgBossWorker() : graphileWorker());
} else {
  await parent();
}
