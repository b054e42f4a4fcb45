// The agent's loop of docs/sessions.md, as a program: a session is assigned
// a pull request, pushes once through the gate (recorded in the ledger) and
// finishes. The function between the include and main is the block in the
// docs (ctest checks they stay equal). Exits non-zero if anything is off.
//   usage: cplane-example-agent-loop DB_PATH
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <cplane/cplane.hpp>

namespace {
int pushes = 0;
void push() { ++pushes; }  // the mutation on the forge
void retry_after(cplane::Micros) {}  // ask again once that lease lapses
}  // namespace

// One pass of agent-1 over the pull request `pr`.
void agent_pass(cplane::ControlStore& store, const std::string& pr) {
  store.open_session("agent-1");
  const cplane::Assignment a =
      store.assign_and_lease("agent-1", pr, {"push", "comment"}, cplane::Seconds{300});
  if (a.outcome == cplane::AssignOutcome::wait) return retry_after(a.until);
  if (!a) return;                                      // no_safe_work: pick another item
  store.session_heartbeat("agent-1", cplane::Seconds{300});
  const auto verdict = store.record_mutation("agent-1", pr, a.fence, "push", a.expected_head);
  if (verdict) push();                                 // else verdict.reason(): a GateReason
  store.finish(pr, a.fence, cplane::Outcome::done);
  store.close_session("agent-1");
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " DB_PATH\n";
    return 2;
  }
  std::remove(argv[1]);
  cplane::ControlStore store{argv[1]};
  store.create_project("forge", "Forge work");
  const std::string pr = store.enqueue(
      "forge", R"({"title":"fix the flaky test"})",
      {.kind = cplane::WorkKind::pr, .ref = "acme/api#42", .head = "3f2a9c1", .author = "agent-7"});
  agent_pass(store, pr);
  std::vector<std::string> types;
  for (const auto& e : store.events(pr)) types.emplace_back(e.type());
  if (pushes != 1) return 1;
  if (types != std::vector<std::string>{"queued", "assigned", "lease_extended",
                                        "mutation_recorded", "done"}) {
    return 1;
  }
  if (!cplane::verify_ledger(store).empty()) return 1;
  std::cout << "ok: assigned, one push through the gate, done; the ledger verifies\n";
  return 0;
}
