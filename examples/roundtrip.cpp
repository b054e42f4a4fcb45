// The README's library round trip, as a program: one item queued, claimed,
// finished, and the ledger verified. Exits non-zero if anything is off.
//   usage: cplane-example-roundtrip DB_PATH
#include <cassert>
#include <cstdio>
#include <iostream>

#include <cplane/cplane.hpp>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " DB_PATH\n";
    return 2;
  }
  std::remove(argv[1]);
  cplane::ControlStore store{argv[1], {.lease = std::chrono::seconds{900}}};
  store.create_project("alpha", "Project Alpha", "open");
  auto id = store.enqueue("alpha", R"({"task": "summarise the report"})");
  auto claim = store.claim("worker-1");  // std::optional<cplane::ClaimedItem>
  if (!claim || claim->item_id != id || claim->fence != 1) return 1;
  store.finish(claim->item_id, claim->fence, cplane::Outcome::done);
  try {
    store.finish(claim->item_id, claim->fence, cplane::Outcome::done);  // already done
    return 1;
  } catch (const cplane::FenceRejected& e) {
    std::cout << "refused as it should be: " << e.what() << '\n';
  }
  for (const auto& e : store.events(id)) std::cout << e.seq << ' ' << e.type() << '\n';
  if (!cplane::verify_ledger(store).empty()) return 1;
  std::cout << "ok: the ledger verifies\n";
  return 0;
}
