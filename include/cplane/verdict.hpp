// Verdicts as values: what a check decided, with a reason a program can
// branch on, and a throwing require() for callers that want an exception.
//
//   const auto v = store.check_fence(item, fence);   // Verdict<FenceRejected::Reason>
//   if (!v) log(v.reason(), v.message());             // a value: branch on it
//   require(v);                                       // or: throw FenceRejected
//
// The fence check (FenceVerdict) and the mutation gate (GateVerdict:
// allowed | denied(reason)) are Verdicts. Assignment and allocation answer
// with values of their own (<cplane/store.hpp>): assign_and_lease an
// `Assignment` (assigned | wait | no_safe_work), allocate_next an
// `Allocation` (preview | assigned | wait | no_safe_work, with the
// candidates it skipped and each one's SkipReason).
#pragma once

#include <optional>
#include <string>
#include <utility>

#include <cplane/errors.hpp>

namespace cplane {

template <class Reason>
class Verdict {
 public:
  static Verdict allowed() { return Verdict(); }
  static Verdict denied(Reason reason, std::string message) {
    Verdict v;
    v.denial_ = Denial{reason, std::move(message)};
    return v;
  }

  bool is_allowed() const { return !denial_; }
  explicit operator bool() const { return is_allowed(); }
  // Only for a denial: InvalidArgument (misuse) on an allowed verdict.
  Reason reason() const { return denial().reason; }
  const std::string& message() const { return denial().message; }

 private:
  struct Denial {
    Reason reason;
    std::string message;
  };
  const Denial& denial() const {
    if (!denial_) {
      throw InvalidArgument(InvalidArgument::Reason::misuse, "an allowed verdict has no reason");
    }
    return *denial_;
  }
  std::optional<Denial> denial_;
};

using FenceVerdict = Verdict<FenceRejected::Reason>;

// Throws FenceRejected (with the verdict's reason) unless it allows.
inline void require(const FenceVerdict& verdict) {
  if (!verdict) throw FenceRejected(verdict.reason(), verdict.message());
}

// The mutation gate's verdict: allowed, or denied with exactly one reason.
using GateVerdict = Verdict<GateReason>;

// Throws MutationDenied (with the verdict's reason) unless it allows.
inline void require(const GateVerdict& verdict) {
  if (!verdict) throw MutationDenied(verdict.reason(), verdict.message());
}

}  // namespace cplane
