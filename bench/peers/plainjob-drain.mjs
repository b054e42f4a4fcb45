// The plainjob peer baseline: the drain of cplane-bench (`--scenario drain`,
// one item per call) done by plainjob, a SQLite job queue for Node.js
// (WAL, synchronous=NORMAL, no fence, no ledger). Run by plainjob.sh, which
// installs plainjob into a temporary folder and points NODE_PATH at it.
//
//   node plainjob-drain.mjs --dir DIR [--workers 16] [--items 10000]
//
// The parent fills a fresh queue (untimed, in transactions of 1,000), forks
// the workers, waits until each has opened its queue, opens the start gate
// and times until the last worker exits, as cplane-bench's fleet does. Each
// worker runs the loop of plainjob's own worker for one job type, without
// its scheduled-job check (one more write transaction per job there): claim
// (`getAndMarkJobAsProcessing`, one BEGIN IMMEDIATE transaction), read the
// job (`getJobById`), finish (`markJobAsDone`, one autocommit UPDATE), until
// a claim comes back empty. Exits 1 unless every item was claimed once and
// is done. Prints one JSON line.
import { fork } from "node:child_process";
import { createRequire } from "node:module";
import path from "node:path";
import process from "node:process";

const require = createRequire(path.join(process.env.NODE_PATH ?? process.cwd(), "x.js"));
const Database = require("better-sqlite3");
const { better, defineQueue } = await import(
  path.join(process.env.NODE_PATH ?? "", "plainjob", "dist", "plainjob.js")
);

function option(name, fallback) {
  const at = process.argv.indexOf(`--${name}`);
  return at >= 0 ? process.argv[at + 1] : fallback;
}

const dir = option("dir");
const workers = Number(option("workers", "16"));
const items = Number(option("items", "10000"));
const db = path.join(dir ?? "", "plainjob.db");
const kJobType = "bench";
const quietLog = { error: console.error, warn() {}, info() {}, debug() {} };

function openQueue() {
  return defineQueue({ connection: better(new Database(db)), logger: quietLog });
}

function isBusy(error) {
  return error && (error.code === "SQLITE_BUSY" || error.code === "SQLITE_LOCKED");
}

function worker() {
  const queue = openQueue();
  process.on("message", (message) => {
    if (message !== "go") return;
    let claims = 0;
    let busy = 0;
    for (;;) {
      try {
        const claimed = queue.getAndMarkJobAsProcessing(kJobType);
        if (!claimed) break;
        const job = queue.getJobById(claimed.id);
        if (!job) throw new Error(`claimed job ${claimed.id} cannot be read`);
        queue.markJobAsDone(job.id);
        ++claims;
      } catch (error) {
        if (!isBusy(error)) throw error;
        ++busy;
      }
    }
    queue.close();
    process.send({ claims, busy }, () => process.exit(0));
  });
  process.send("ready");
}

async function parent() {
  if (!dir || !(workers > 0) || !(items > 0)) {
    console.error("usage: node plainjob-drain.mjs --dir DIR [--workers N] [--items N]");
    process.exit(2);
  }
  const filler = openQueue();
  const payload = { task: "benchmark item" };
  for (let done = 0; done < items; done += 1000) {
    filler.addMany(kJobType, new Array(Math.min(1000, items - done)).fill(payload));
  }
  filler.close();

  const children = [];
  const records = [];
  let ready = 0;
  let started = 0;
  await new Promise((resolve, reject) => {
    let exited = 0;
    for (let w = 0; w < workers; ++w) {
      const child = fork(process.argv[1], ["--worker", ...process.argv.slice(2)], {
        env: process.env,
      });
      child.on("message", (message) => {
        if (message === "ready") {
          if (++ready === workers) {
            started = performance.now();
            for (const c of children) c.send("go");
          }
        } else {
          records.push(message);
        }
      });
      child.on("exit", (code) => {
        if (code !== 0) reject(new Error(`worker ${w} exited with ${code}`));
        if (++exited === workers) resolve();
      });
      children.push(child);
    }
  });
  const seconds = (performance.now() - started) / 1e3;

  const check = new Database(db, { readonly: true });
  const done = check.prepare("SELECT COUNT(*) AS n FROM plainjob_jobs WHERE status = 2").get().n;
  check.close();
  const claims = records.map((r) => r.claims);
  const total = claims.reduce((a, b) => a + b, 0);
  const ok = records.length === workers && total === items && done === items;
  console.log(
    JSON.stringify({
      system: "plainjob",
      store: "sqlite",
      synchronous: "NORMAL",
      workers,
      items: total,
      done,
      seconds: Number(seconds.toFixed(3)),
      items_per_s: Math.round(total / seconds),
      min_claims: Math.min(...claims),
      max_claims: Math.max(...claims),
      busy_errors: records.reduce((a, r) => a + r.busy, 0),
      ok,
    }),
  );
  process.exit(ok ? 0 : 1);
}

if (process.argv.includes("--worker")) worker();
else await parent();
