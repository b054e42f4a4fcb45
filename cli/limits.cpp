// cplane limit set|remove, limits, why: limits on concurrency keys (live
// leases and a rate), and why an item is not being claimed now.
#include "cli/cli.hpp"
#include "events/json.hpp"

namespace cplane::cli {

namespace {

std::string holders_json(const std::vector<ControlStore::KeyHolder>& holders) {
  std::string out = "[";
  for (std::size_t i = 0; i < holders.size(); ++i) {
    out += (i ? "," : "") + JsonObject()
                                .str("item_id", holders[i].item_id)
                                .str("project_id", holders[i].project_id)
                                .num("fence", static_cast<std::int64_t>(holders[i].fence))
                                .num("lease_expires_at", holders[i].lease_expires_at)
                                .done();
  }
  return out + "]";
}

// "10/s", "5/30s", "100/m": a rate as limit set takes it.
std::string rate_text(const LimitRow& l) {
  if (l.rate_count == 0) return "none";
  static constexpr std::pair<Micros, const char*> kUnits[] = {
      {86'400'000'000, "d"}, {3'600'000'000, "h"}, {60'000'000, "m"}, {1'000'000, "s"},
      {1'000, "ms"}};
  for (const auto& [scale, unit] : kUnits) {
    if (l.rate_period % scale != 0) continue;
    const Micros n = l.rate_period / scale;
    return n == 1 ? fmt::format("{}/{}", l.rate_count, unit)
                  : fmt::format("{}/{}{}", l.rate_count, n, unit);
  }
  return fmt::format("{}/{}us", l.rate_count, l.rate_period);
}

}  // namespace

Validity Cli::set_concurrency(kj::StringPtr text) {
  const auto n = parse_int<std::int64_t>(text);
  if (!n || *n < 1 || *n > 1000000) {
    return "--concurrency takes a whole number of live leases from 1 to 1000000";
  }
  concurrency_ = static_cast<std::uint32_t>(*n);
  return true;
}
Validity Cli::set_rate(kj::StringPtr text) {
  try {
    parse_rate(std::string_view(text.cStr(), text.size()));
  } catch (const InvalidArgument& e) {
    return kj::str(e.what());
  }
  rate_ = std::string(text.cStr(), text.size());
  return true;
}
Validity Cli::set_burst(kj::StringPtr text) {
  const auto n = parse_int<std::int64_t>(text);
  if (!n || *n < 1 || *n > 1000000) return "--burst takes a whole number from 1 to 1000000";
  burst_ = static_cast<std::uint32_t>(*n);
  return true;
}
Validity Cli::set_weight(kj::StringPtr text) {
  const auto n = parse_int<std::int64_t>(text);
  if (!n || *n < 1 || *n > kMaxWeight) return "--weight takes a whole number from 1 to 1000";
  weight_ = static_cast<std::uint32_t>(*n);
  return true;
}
Validity Cli::set_concurrency_key(kj::StringPtr text) {
  try {
    require_concurrency_key(std::string_view(text.cStr(), text.size()));
  } catch (const InvalidArgument& e) {
    return kj::str(e.what());
  }
  concurrency_key_ = std::string(text.cStr(), text.size());
  return true;
}

kj::MainFunc Cli::limit_command() {
  return globals(kj::MainBuilder(context_, kVersionLine,
                                 "Limits on concurrency keys: how many items of a key run at "
                                 "once (live leases), and how fast claims of them start."))
      .addSubCommand("set", KJ_BIND_METHOD(*this, limit_set_command),
                     "set a key's limit (whole: what is not given is no bound)")
      .addSubCommand("remove", KJ_BIND_METHOD(*this, limit_remove_command),
                     "remove a key's limit")
      .build();
}

kj::MainFunc Cli::limit_set_command() {
  return globals(kj::MainBuilder(
             context_, kVersionLine,
             "Set the limit of concurrency KEY: at most --concurrency N of its items under a "
             "live lease at once, and claims of them started no faster than --rate N/PERIOD "
             "(10/s, 100/m, 5/30s), --burst B back to back. It replaces the key's limit whole, "
             "takes effect at the next claim and never revokes a live lease. Exit 2 for a "
             "limit of 0, a rate that does not parse, a burst without a rate."))
      .addOptionWithArg({"concurrency"}, KJ_BIND_METHOD(*this, set_concurrency), "<n>",
                        "live leases at most, at least 1")
      .addOptionWithArg({"rate"}, KJ_BIND_METHOD(*this, set_rate), "<n/period>",
                        "claims per period: 10/s, 100/m, 5/30s")
      .addOptionWithArg({"burst"}, KJ_BIND_METHOD(*this, set_burst), "<b>",
                        "with --rate: claims that may start back to back (default 1)")
      .addOptionWithArg({"actor"}, KJ_BIND_METHOD(*this, set_actor), "<actor>",
                        "who sets it, recorded in the event")
      .expectArg("KEY", KJ_BIND_METHOD(*this, set_positional))
      .callAfterParsing(KJ_BIND_METHOD(*this, run_limit_set))
      .build();
}

Validity Cli::run_limit_set() {
  if (!concurrency_ && !rate_) return "limit set needs --concurrency N, --rate N/PERIOD or both";
  if (burst_ && !rate_) return "--burst needs --rate N/PERIOD";
  return run([&] {
    require_concurrency_key(args_[0]);
    auto store = open();
    changed_ = store.set_limit(args_[0], {.concurrency = concurrency_.value_or(0),
                                          .rate = rate_.value_or(""),
                                          .burst = burst_.value_or(0),
                                          .actor = actor_,
                                          .now = now_});
    for (const auto& info : store.limits(now_)) {
      if (info.row.key != args_[0]) continue;
      if (json_) {
        print(limit_json(info).insert(1, fmt::format("\"changed\":{},", changed_ ? "true" : "false")));
      } else {
        print(fmt::format("{} concurrency {} rate {}{}{}", escape_invisible(args_[0]),
                          info.row.concurrency == 0 ? std::string("none")
                                                    : std::to_string(info.row.concurrency),
                          rate_text(info.row),
                          info.row.rate_count == 0 ? std::string()
                                                   : fmt::format(" burst {}", info.row.burst),
                          changed_ ? "" : " (already)"));
      }
    }
  });
}

kj::MainFunc Cli::limit_remove_command() {
  return globals(kj::MainBuilder(context_, kVersionLine,
                                 "Remove the limit of concurrency KEY: its items are bounded by "
                                 "nothing. Exit 7 for a key that never had one."))
      .addOptionWithArg({"actor"}, KJ_BIND_METHOD(*this, set_actor), "<actor>",
                        "who removes it, recorded in the event")
      .expectArg("KEY", KJ_BIND_METHOD(*this, set_positional))
      .callAfterParsing(KJ_BIND_METHOD(*this, run_limit_remove))
      .build();
}

Validity Cli::run_limit_remove() {
  return run([&] {
    require_concurrency_key(args_[0]);
    auto store = open();
    changed_ = store.remove_limit(args_[0], {.actor = actor_, .now = now_});
    print(json_ ? JsonObject().str("key", args_[0]).boolean("removed", true).boolean("changed", changed_).done()
                : fmt::format("{} removed{}", escape_invisible(args_[0]), changed_ ? "" : " (already)"));
  });
}

std::string Cli::limit_json(const ControlStore::LimitInfo& info) {
  const LimitRow& row = info.row;
  return JsonObject()
      .str("key", row.key)
      .num_or_null("concurrency", row.concurrency)
      .num_or_null("rate_count", row.rate_count)
      .num_or_null("rate_period_us", row.rate_period)
      .num_or_null("burst", row.burst)
      .num("live", info.live)
      .raw("holders", holders_json(info.holders))
      .num_or_null("next_token", row.rate_count == 0 ? 0 : info.next_token)
      .num("updated_at", row.updated_at)
      .done();
}

kj::MainFunc Cli::limits_command() {
  return globals(kj::MainBuilder(context_, kVersionLine,
                                 "List the limits by key: the bound, the rate, the live leases "
                                 "now and the items that hold them."))
      .callAfterParsing(KJ_BIND_METHOD(*this, run_limits))
      .build();
}

Validity Cli::run_limits() {
  return run([&] {
    auto store = open(Access::read);
    const auto rows = store.limits(now_);
    if (json_) {
      std::string out = "[";
      for (std::size_t i = 0; i < rows.size(); ++i) out += (i ? "," : "") + limit_json(rows[i]);
      print(out + "]");
      return;
    }
    for (const auto& info : rows) {
      const LimitRow& l = info.row;
      print(fmt::format("{} concurrency {} live {} rate {}{}", escape_invisible(l.key),
                        l.concurrency == 0 ? std::string("none") : std::to_string(l.concurrency),
                        info.live, rate_text(l),
                        l.rate_count == 0 ? std::string() : fmt::format(" burst {}", l.burst)));
    }
  });
}

kj::MainFunc Cli::why_command() {
  return globals(kj::MainBuilder(
             context_, kVersionLine,
             "Say why ITEM is not being claimed now: every reason that holds (terminal, "
             "running, scheduled, project_paused, key_full, rate_limited, behind, "
             "out_of_scope for --actor, exhausted), each with what would change it. Exit 7 for "
             "no such item."))
      .addOptionWithArg({"actor"}, KJ_BIND_METHOD(*this, set_actor), "<actor>",
                        "as this scoped actor's claim would see it")
      .expectArg("ITEM", KJ_BIND_METHOD(*this, set_positional))
      .callAfterParsing(KJ_BIND_METHOD(*this, run_why))
      .build();
}

Validity Cli::run_why() {
  return run([&] {
    require_name(args_[0], "item id");
    auto store = open(Access::read);
    const auto why = store.explain(args_[0], actor_, now_);
    if (json_) {
      std::string reasons = "[";
      for (std::size_t i = 0; i < why.reasons.size(); ++i) {
        const auto& r = why.reasons[i];
        JsonObject o;
        o.str("reason", to_string(r.kind)).str("message", r.message).num_or_null("until", r.until);
        if (!r.key.empty()) {
          o.str("key", r.key).num_or_null("limit", r.limit).num("live", r.live);
          o.raw("holders", holders_json(r.holders));
        }
        if (r.kind == ControlStore::WhyKind::behind) {
          o.num("ahead", r.ahead).num("weight", r.weight).num("competing", r.competing);
        }
        reasons += (i ? "," : "") + o.done();
      }
      print(JsonObject()
                .str("item_id", why.item_id)
                .str("project_id", why.project_id)
                .str("status", to_string(why.status))
                .num("at", why.at)
                .boolean("claimable", why.claimable)
                .raw("reasons", reasons + "]")
                .done());
      return;
    }
    print(fmt::format("{} {}{}", why.item_id, to_string(why.status),
                      why.claimable ? ": a claim now may take it" : ""));
    for (const auto& r : why.reasons) {
      print(fmt::format("{}: {}", to_string(r.kind), escape_invisible(r.message)));
    }
  });
}

}  // namespace cplane::cli
