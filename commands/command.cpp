#include "commands/command.hpp"

#include <cstring>
#include <tuple>
#include <type_traits>

#include <fmt/format.h>

namespace cplane::detail {

namespace {

template <class T>
concept HasFields = requires(T& t) { T::fields(t); };

// The fields of public types that travel in requests and answers.
template <class T>
struct External;
template <>
struct External<IncidentKey> {
  template <class S> static auto fields(S& k) {
    return std::tie(k.provider, k.fingerprint, k.org, k.repo, k.environment);
  }
};
template <>
struct External<IncidentObservation> {
  template <class S> static auto fields(S& o) {
    return std::tie(o.status, o.event_count, o.permalink, o.first_seen, o.last_seen, o.linked_prs);
  }
};
template <>
struct External<ControlStore::ScheduleSpec> {
  template <class S> static auto fields(S& s) {
    return std::tie(s.project_id, s.cron, s.payload, s.zone, s.overlap, s.catch_up, s.now);
  }
};
template <>
struct External<Assignment> {
  template <class S> static auto fields(S& a) {
    return std::tie(a.outcome, a.item_id, a.fence, a.lease_expires_at, a.expected_head, a.actions,
                    a.until);
  }
};
template <class T>
concept HasExternalFields = requires(T& t) { External<T>::fields(t); };

template <class T>
struct IsPair : std::false_type {};
template <class A, class B>
struct IsPair<std::pair<A, B>> : std::true_type {};

template <class T>
struct IsOptional : std::false_type {};
template <class T>
struct IsOptional<std::optional<T>> : std::true_type {};
template <class T>
struct IsVector : std::false_type {};
template <class T>
struct IsVector<std::vector<T>> : std::true_type {};

class Writer {
 public:
  std::string out;

  template <class T>
  void put(const T& value) {
    if constexpr (std::is_same_v<T, std::string>) {
      put_u64(value.size());
      out.append(value);
    } else if constexpr (std::is_same_v<T, bool>) {
      out.push_back(value ? 1 : 0);
    } else if constexpr (std::is_enum_v<T>) {
      put_u64(static_cast<std::uint64_t>(static_cast<std::int64_t>(value)));
    } else if constexpr (std::is_integral_v<T>) {
      put_u64(static_cast<std::uint64_t>(value));
    } else if constexpr (IsOptional<T>::value) {
      put(value.has_value());
      if (value) put(*value);
    } else if constexpr (IsVector<T>::value) {
      put_u64(value.size());
      for (const auto& v : value) put(v);
    } else if constexpr (HasFields<T>) {
      std::apply([&](const auto&... f) { (put(f), ...); }, T::fields(value));
    } else if constexpr (HasExternalFields<T>) {
      std::apply([&](const auto&... f) { (put(f), ...); }, External<T>::fields(value));
    } else if constexpr (IsPair<T>::value) {
      put(value.first);
      put(value.second);
    } else if constexpr (std::is_same_v<T, GateVerdict>) {
      put(value.is_allowed());
      if (!value) {
        put(value.reason());
        put(value.message());
      }
    } else if constexpr (std::is_same_v<T, ClaimedValue>) {
      const auto& c = value.item;
      put(c.item_id);
      put(c.project_id);
      put(value.elided ? std::string() : c.payload);
      put(c.fence);
      put(c.attempts);
      put(c.lease_expires_at);
      put(value.elided);
    } else {
      static_assert(sizeof(T) == 0, "no encoding for this type");
    }
  }

 private:
  void put_u64(std::uint64_t v) {
    char bytes[8];
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((v >> (8 * i)) & 0xff);
    out.append(bytes, 8);
  }
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}

  template <class T>
  void get(T& value) {
    if constexpr (std::is_same_v<T, std::string>) {
      const std::uint64_t n = get_u64();
      if (n > in_.size() - at_) bad();
      value.assign(in_.data() + at_, n);
      at_ += n;
    } else if constexpr (std::is_same_v<T, bool>) {
      if (at_ >= in_.size()) bad();
      value = in_[at_++] != 0;
    } else if constexpr (std::is_enum_v<T>) {
      value = static_cast<T>(static_cast<std::int64_t>(get_u64()));
    } else if constexpr (std::is_integral_v<T>) {
      value = static_cast<T>(get_u64());
    } else if constexpr (IsOptional<T>::value) {
      bool present = false;
      get(present);
      value.reset();
      if (present) get(value.emplace());
    } else if constexpr (IsVector<T>::value) {
      const std::uint64_t n = get_u64();
      if (n > in_.size() - at_) bad();  // every element takes a byte at least
      value.clear();
      value.resize(n);
      for (auto& v : value) get(v);
    } else if constexpr (HasFields<T>) {
      std::apply([&](auto&... f) { (get(f), ...); }, T::fields(value));
    } else if constexpr (HasExternalFields<T>) {
      std::apply([&](auto&... f) { (get(f), ...); }, External<T>::fields(value));
    } else if constexpr (IsPair<T>::value) {
      get(value.first);
      get(value.second);
    } else if constexpr (std::is_same_v<T, GateVerdict>) {
      bool allowed = false;
      get(allowed);
      if (allowed) {
        value = GateVerdict::allowed();
      } else {
        GateReason reason{};
        std::string message;
        get(reason);
        get(message);
        value = GateVerdict::denied(reason, std::move(message));
      }
    } else if constexpr (std::is_same_v<T, ClaimedValue>) {
      auto& c = value.item;
      get(c.item_id);
      get(c.project_id);
      get(c.payload);
      get(c.fence);
      get(c.attempts);
      get(c.lease_expires_at);
      get(value.elided);
    } else {
      static_assert(sizeof(T) == 0, "no decoding for this type");
    }
  }

  std::uint64_t get_u64() {
    if (in_.size() - at_ < 8) bad();
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(static_cast<unsigned char>(in_[at_ + i])) << (8 * i);
    at_ += 8;
    return v;
  }

  void finish() const {
    if (at_ != in_.size()) bad();
  }

 private:
  [[noreturn]] static void bad() {
    throw InternalError("a group-commit message is cut short or malformed (the shared area was "
                        "written by another build, or damaged)");
  }
  std::string_view in_;
  std::size_t at_ = 0;
};

template <class Variant>
void get_variant(Reader& r, Variant& v) {
  const std::uint64_t index = r.get_u64();
  bool found = false;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((index == I ? (v.template emplace<I>(), r.get(std::get<I>(v)), found = true) : false), ...);
  }(std::make_index_sequence<std::variant_size_v<Variant>>{});
  if (!found) throw InternalError(fmt::format("a group-commit message of unknown kind {}", index));
}

}  // namespace

std::string encode_command(const Command& command) {
  Writer w;
  w.put(static_cast<std::uint64_t>(command.index()));
  std::visit([&](const auto& c) { w.put(c); }, command);
  return std::move(w.out);
}

Command decode_command(std::string_view bytes) {
  Reader r(bytes);
  Command command;
  get_variant(r, command);
  r.finish();
  return command;
}

std::string encode_answer(const Answer& answer, std::size_t max_payload) {
  Writer w;
  w.put(answer.error);
  w.put(static_cast<std::uint64_t>(answer.value.index()));
  std::visit(
      [&](const auto& v) {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, std::monostate>) {
        } else if constexpr (std::is_same_v<V, std::optional<ClaimedValue>>) {
          auto c = v;
          if (c && c->item.payload.size() > max_payload) c->elided = true;
          w.put(c);
        } else if constexpr (std::is_same_v<V, std::vector<ClaimedValue>>) {
          auto list = v;
          for (auto& c : list) c.elided = c.elided || c.item.payload.size() > max_payload;
          w.put(list);
        } else {
          w.put(v);
        }
      },
      answer.value);
  return std::move(w.out);
}

Answer decode_answer(std::string_view bytes) {
  Reader r(bytes);
  Answer answer;
  r.get(answer.error);
  const std::uint64_t index = r.get_u64();
  bool found = false;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((index == I ? (answer.value.emplace<I>(),
                    [&] {
                      using V = std::variant_alternative_t<I, Value>;
                      if constexpr (!std::is_same_v<V, std::monostate>) r.get(std::get<I>(answer.value));
                    }(),
                    found = true)
                 : false),
     ...);
  }(std::make_index_sequence<std::variant_size_v<Value>>{});
  if (!found) throw InternalError(fmt::format("a group-commit answer of unknown kind {}", index));
  r.finish();
  return answer;
}

std::uint64_t codec_fingerprint() {
  static const std::uint64_t fingerprint = [] {
    std::string bytes;
    // Every member, default-built: each field encodes to at least a byte,
    // so a field added, removed or retyped changes the bytes.
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((bytes += encode_command(Command{std::in_place_index<I>})), ...);
    }(std::make_index_sequence<std::variant_size_v<Command>>{});
    const Answer answers[] = {
        {std::string()},
        {std::vector<std::string>{std::string()}},
        {std::optional<ClaimedValue>{ClaimedValue{}}},
        {std::vector<ClaimedValue>{ClaimedValue{}}},
        {Micros{0}},
        {false},
        {std::vector<std::pair<std::string, Micros>>{{std::string(), 0}}},
        {Assignment{.actions = {std::string()}}},
        {GateVerdict::denied(GateReason{}, "")},
        {std::monostate{}, ErrorValue{}},
    };
    for (const auto& a : answers) bytes += encode_answer(a);
    bytes += std::to_string(std::variant_size_v<Value>);
    // What the bytes cannot show (two fields of one type swapped, an enum
    // value given another meaning): bump it with such a change.
    bytes += "codec 2";  // 2: an invalid_argument carries its reason
    std::uint64_t hash = 1469598103934665603ull;  // FNV-1a
    for (const unsigned char c : bytes) hash = (hash ^ c) * 1099511628211ull;
    return hash == 0 ? 1 : hash;
  }();
  return fingerprint;
}

storage::Sync sync_of(const Command& command) {
  return std::visit([](const auto& c) { return c.sync; }, command);
}

ErrorValue capture_error() {
  try {
    throw;
  } catch (const FenceRejected& e) {
    return {ErrorValue::fence_rejected, static_cast<std::int32_t>(e.reason()), e.what()};
  } catch (const ScopeDenied& e) {
    return {ErrorValue::scope_denied, 0, e.what()};
  } catch (const InvalidArgument& e) {
    return {ErrorValue::invalid_argument, static_cast<std::int32_t>(e.reason()), e.what()};
  } catch (const NotFound& e) {
    return {ErrorValue::not_found, static_cast<std::int32_t>(e.reason()), e.what()};
  } catch (const MutationDenied& e) {
    return {ErrorValue::mutation_denied, static_cast<std::int32_t>(e.reason()), e.what()};
  } catch (const StorageError& e) {
    return {ErrorValue::storage, static_cast<std::int32_t>(e.category()), e.what()};
  } catch (const std::exception& e) {
    return {ErrorValue::internal, 0, e.what()};
  } catch (...) {
    return {ErrorValue::internal, 0, "an unknown exception"};
  }
}

void throw_error(const ErrorValue& e) {
  switch (e.kind) {
    case ErrorValue::fence_rejected:
      throw FenceRejected(static_cast<FenceRejected::Reason>(e.code), e.message);
    case ErrorValue::scope_denied: throw ScopeDenied();
    case ErrorValue::invalid_argument:
      throw InvalidArgument(static_cast<InvalidArgument::Reason>(e.code), e.message);
    case ErrorValue::not_found: throw NotFound(static_cast<NotFound::Reason>(e.code), e.message);
    case ErrorValue::mutation_denied:
      throw MutationDenied(static_cast<GateReason>(e.code), e.message);
    case ErrorValue::storage:
      throw StorageError(static_cast<StorageError::Category>(e.code), e.message);
    case ErrorValue::internal:
    case ErrorValue::run_alone: break;
  }
  throw InternalError(e.message);
}

}  // namespace cplane::detail
