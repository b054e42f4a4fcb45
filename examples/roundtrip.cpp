// The library round trip of docs/library.md, as a program: one item queued,
// claimed, finished, and the ledger verified. The function between the
// include and main is the block in the docs (ctest checks they stay equal).
// Exits non-zero if anything is off.
//   usage: cplane-example-roundtrip DB_PATH
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <cplane/cplane.hpp>

// One item queued, claimed by a worker and finished; returns its id.
std::string round_trip(const std::string& db_path) {
  cplane::ControlStore store{db_path, {.lease = std::chrono::seconds{900}}};
  store.create_project("alpha", "Project Alpha", "open");
  auto id = store.enqueue("alpha", R"({"task": "summarise the report"})");
  auto claim = store.claim("worker-1");  // std::optional<cplane::ClaimedItem>
  // claim->item_id, project_id, payload, fence, attempts, lease_expires_at
  store.finish(claim->item_id, claim->fence, cplane::Outcome::done);  // or throws FenceRejected
  for (const auto& e : store.events(id)) std::cout << e.type() << '\n';  // queued, claimed, done
  std::cout << cplane::verify_ledger(store).size() << " problems\n";      // 0
  return id;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " DB_PATH\n";
    return 2;
  }
  std::remove(argv[1]);
  const std::string id = round_trip(argv[1]);
  cplane::ControlStore store{argv[1]};
  std::vector<std::string> types;
  cplane::Fence fence = 0;
  for (const auto& e : store.events(id)) types.emplace_back(e.type());
  if (types != std::vector<std::string>{"queued", "claimed", "done"}) return 1;
  fence = store.item(id).fence;
  if (fence != 1) return 1;
  try {
    store.finish(id, fence, cplane::Outcome::done);  // already done
    return 1;
  } catch (const cplane::FenceRejected& e) {
    std::cout << "refused as it should be: " << e.what() << '\n';
  }
  if (!cplane::verify_ledger(store).empty()) return 1;
  std::cout << "ok: the ledger verifies\n";
  return 0;
}
