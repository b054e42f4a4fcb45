// Flow control inside a claim's transaction: the limits of the keys it
// meets (KeyGate) and the choice of the next item (ClaimChooser): priority
// within a project, weighted round-robin across projects, and items whose
// key is full or rate-limited passed over without walking the queue.
// Internal to commands/.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "commands/control_store.hpp"
#include "projections/rules.hpp"
#include "storage/backend.hpp"

namespace cplane::detail {

// The state of every key one transaction meets, read once (the limit row,
// the live leases counted from the claimed rows) and kept as it claims.
class KeyGate {
 public:
  KeyGate(storage::Backend& backend, Micros at) : backend_(backend), at_(at) {}
  // Why an item of `key` may not start now; nullopt: it may ("" never blocks).
  std::optional<KeyBlock> block(const std::string& key);
  // The key's limit, or null for none (or removed).
  const LimitRow* limit(const std::string& key);
  // An item of `key` was claimed (or assigned) by `stored`: one more live
  // lease, and the rate's state moves on in the limit row (put_limit).
  void claimed(const std::string& key, const StoredEvent& stored);

 private:
  struct State {
    std::optional<LimitRow> limit;
    std::int64_t live = -1;  // -1: not counted yet
  };
  State& state(const std::string& key);
  storage::Backend& backend_;
  Micros at_;
  std::map<std::string, State> keys_;
};

// When an assignment of `row` may be asked for again, if its key blocks it
// now: the first holder's lease end (key full), the next token (rate).
std::optional<Micros> key_wait_until(storage::Backend& backend, KeyGate& gate, const ItemRow& row,
                                     Micros at);

// One claim's (or one batch's) choice of items, in the order claims one
// after another would take them.
class ClaimChooser {
 public:
  // `want`: how many it will be asked for (a batch reads that many per
  // list). `before_read` runs before each read that must see the claims
  // made so far (a batch appends its claims together, later).
  ClaimChooser(ControlStore::Impl& s, KeyGate& gate, Micros at, const std::string* actor,
               bool fair, std::size_t want, std::function<void()> before_read = {});
  // The next item to claim, and the fair_pass its claim records (0: none);
  // nullopt when nothing may be claimed. Fails lapsed items with no
  // attempts left on the way (never handed out).
  struct Choice {
    ItemRow row;
    std::int64_t fair_pass = 0;
  };
  std::optional<Choice> next();
  // The claim of the choice was appended as `stored`: the project's pass.
  void claimed(const Choice& choice, const StoredEvent& stored);

 private:
  struct Project {
    std::string id;
    std::vector<storage::Backend::CandidateList> lists;
    std::vector<std::size_t> next;
    bool slow = false;  // a head's key was blocked: choose among key groups
    std::optional<ProjectRow> row;
  };
  void load();
  // The project's best item now (claim_before), or nullopt; sets `stale`
  // when a list ran out that may go on (load again), `restart` when it
  // failed an exhausted item.
  std::optional<ItemRow> best_of(Project& p, bool& stale, bool& restart);
  std::optional<ItemRow> best_by_key(Project& p, bool& restart);
  bool usable(const ItemRow& row, bool& restart);
  const ProjectRow& project_row(Project& p);

  ControlStore::Impl& s_;
  KeyGate& gate_;
  Micros at_;
  const std::string* actor_;
  bool fair_;
  std::size_t want_;
  std::function<void()> before_read_;
  bool loaded_ = false;
  std::vector<Project> projects_;
};

}  // namespace cplane::detail
