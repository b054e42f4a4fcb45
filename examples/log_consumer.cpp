// The log consumer of docs/operator.md, as a program: it reads the log in
// batches of final events and keeps the last seq it handled, so that a
// restart resumes exactly after it (nothing missed, nothing twice); and it
// pages the failed items with a cursor. The functions between the include
// and main are the blocks in the docs (ctest checks they stay equal).
// Exits non-zero if anything is off.
//   usage: cplane-example-log-consumer DB_PATH
#include <chrono>
#include <cstdio>
#include <iostream>
#include <set>
#include <string>

#include <cplane/cplane.hpp>

// Hands every event after `last_seen` to `handle`, waiting up to `idle`
// for more once the log is read; returns the last seq handled, to be kept
// (with what `handle` did) and passed again after a restart.
template <class Handle>
cplane::Seq consume(cplane::ControlStore& store, cplane::Seq last_seen,
                    std::chrono::milliseconds idle, Handle&& handle) {
  for (;;) {
    auto batch = store.read_log(last_seen, 1000);  // only final events, in seq order
    for (const auto& event : batch.events) handle(event);
    last_seen = batch.next;
    if (batch.events.empty() && !store.wait_for_log(last_seen, idle)) return last_seen;
  }
}

// Every failed item, oldest first, a page at a time.
std::vector<std::string> failed_items(cplane::ControlStore& store) {
  std::vector<std::string> out;
  cplane::ControlStore::ItemQuery query;
  query.statuses = {cplane::ItemStatus::failed};
  query.order = cplane::ControlStore::ItemQuery::Order::oldest;
  query.limit = 2;
  for (;;) {
    auto page = store.list_items(query);
    for (const auto& item : page.items) out.push_back(item.item_id);
    if (!page.next) return out;
    query.after = page.next;  // the cursor: the last item of this page
    query.after_seq = page.next_seq;  // and its place then
  }
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " DB_PATH\n";
    return 2;
  }
  std::remove(argv[1]);
  cplane::ControlStore store{argv[1]};
  store.create_project("alpha", "Project Alpha");
  for (int i = 0; i < 5; ++i) store.enqueue("alpha", "{}");
  std::set<cplane::Seq> seen;
  auto count = [&](const cplane::StoredEvent& e) {
    if (!seen.insert(e.seq).second) std::exit(1);  // twice
  };
  // A first run, then more events, then a restart from the kept seq.
  const cplane::Seq kept = consume(store, 0, std::chrono::milliseconds{50}, count);
  for (int i = 0; i < 3; ++i) {
    auto item = store.claim("worker");
    store.finish(item->item_id, item->fence, cplane::Outcome::failed);
  }
  const cplane::Seq last = consume(store, kept, std::chrono::milliseconds{50}, count);
  if (seen.size() != 12 || last != store.log_end()) return 1;
  if (failed_items(store).size() != 3) return 1;
  std::cout << "ok: 12 events once each across a restart, 3 failed items in 2 pages\n";
  return 0;
}
