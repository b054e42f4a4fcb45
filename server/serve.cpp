// The console's HTTP layer: KJ's HttpServer on KJ's event loop, one thread.
//
// Each connection gets an HttpServer of its own (cheap: a header table
// reference and the settings) so that its error handler knows the socket:
// KJ drops a request whose header block outgrows its 128 KiB buffer with
// no Response object to answer through, and the handler then writes the
// 431 itself. Requests are answered one at a time: the request is parsed
// into a Request value, Console::handle runs its store calls to their end
// (a snapshot read, or one command's transaction, committed), and only then
// is the response written, asynchronously, under a timeout. So a slow
// reader never holds the write lock or a snapshot, and a store call never
// waits for a socket.
//
// Bounds: the header block (names, values and the URL) at
// ServeLimits::max_header_bytes (431), the body at max_body_bytes (413,
// checked against Content-Length before reading, and while reading a
// chunked one), the connections at max_connections (503), and
// client_timeout on the headers (KJ's headerTimeout), the body, each
// response's write and an idle keep-alive connection (pipelineTimeout).
#include <csignal>

#include <fmt/format.h>
#include <kj/async-io.h>
#include <kj/async-unix.h>
#include <kj/compat/http.h>
#include <kj/compat/url.h>
#include <kj/debug.h>

#include "server/console.hpp"
#include "server/router.hpp"

namespace cplane::server {

namespace {

kj::Duration duration_of(std::chrono::milliseconds ms) {
  return static_cast<std::int64_t>(ms.count()) * kj::MILLISECONDS;
}

// A whole response in raw HTTP/1.1, for the two answers given outside an
// HttpServer's request: a connection over the limit, a header block KJ
// could not hold.
std::string raw_response(const HttpError& error) {
  const std::string body = error_json(error);
  return fmt::format("HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n"
                     "Connection: close\r\n\r\n{}",
                     error.status, status_text(error.status), body.size(), body);
}

bool is_loopback_host(std::string_view host) {
  const std::size_t colon = host.rfind(':');
  std::string_view name = host;
  if (colon != std::string_view::npos && host.find(']') == std::string_view::npos) {
    name = host.substr(0, colon);
  } else if (host.rfind("]") != std::string_view::npos) {
    name = host.substr(0, host.rfind(']') + 1);
  }
  return name == "localhost" || name == "[::1]" || name.rfind("127.", 0) == 0;
}

class ConsoleServer;

class Connection final : public kj::HttpService,
                         public kj::HttpServerErrorHandler,
                         public kj::HttpServerCallbacks {
 public:
  Connection(ConsoleServer& owner, kj::Own<kj::AsyncIoStream> stream);
  kj::Promise<void> run() { return http_.listenHttpCleanDrain(*stream_).ignoreResult(); }

  kj::Promise<void> request(kj::HttpMethod method, kj::StringPtr url,
                            const kj::HttpHeaders& headers, kj::AsyncInputStream& body,
                            kj::HttpService::Response& response) override;

  kj::Promise<void> handleClientProtocolError(kj::HttpHeaders::ProtocolError error,
                                              kj::HttpService::Response& response) override {
    return send(response, server::Response{static_cast<int>(error.statusCode), "application/json",
                                   error_json({static_cast<int>(error.statusCode), "bad_request",
                                               "malformed_request",
                                               std::string("malformed HTTP request: ") +
                                                   error.description.cStr()}),
                                   {}});
  }
  kj::Promise<void> handleApplicationError(kj::Exception exception,
                                           kj::Maybe<kj::HttpService::Response&> response) override {
    KJ_IF_MAYBE(r, response) {
      return send(*r, server::Response{500, "application/json",
                               error_json({500, "error", "unexpected", exception.getDescription().cStr()}),
                               {}});
    }
    // No Response to answer through: the request's header block outgrew
    // KJ's buffer before a request was made of it. Nothing was sent on
    // this connection since the last response: answer on the socket.
    if (std::string_view(exception.getDescription().cStr()).find("headers too large") !=
        std::string_view::npos) {
      auto text = kj::heap<std::string>(raw_response(
          {431, "bad_request", "headers_too_large", "the request's header block is too large"}));
      auto write = stream_->write(text->data(), text->size());
      return write.attach(kj::mv(text)).catch_([](kj::Exception&&) {});
    }
    return kj::READY_NOW;
  }
  // KJ 0.9 answers "Connection: close" with the header, then waits for
  // the client to close: the response's end shuts our side down instead.
  bool shouldClose() override { return close_after_response_; }

  kj::Promise<void> handleNoResponse(kj::HttpService::Response& response) override {
    return send(response, server::Response{500, "application/json",
                                   error_json({500, "error", "unexpected", "no response was made"}),
                                   {}});
  }

 private:
  kj::Promise<void> send(kj::HttpService::Response& response, server::Response answer);
  kj::Promise<void> answer(kj::HttpService::Response& response, Request request,
                           kj::AsyncInputStream& body);

  ConsoleServer& owner_;
  kj::Own<kj::AsyncIoStream> stream_;
  kj::HttpServerSettings settings_;
  kj::HttpServer http_;
  bool close_after_response_ = false;
};

class ConsoleServer final : private kj::TaskSet::ErrorHandler {
 public:
  ConsoleServer(kj::AsyncIoContext& io, Console& console, const ServeOptions& options)
      : io_(io), console_(console), options_(options), tasks_(*this) {
    kj::HttpHeaderTable::Builder builder;
    authorization_ = builder.add("Authorization");
    origin_ = builder.add("Origin");
    accept_ = builder.add("Accept");
    table_ = builder.build();
  }

  kj::Promise<void> accept_loop(kj::ConnectionReceiver& receiver) {
    return receiver.accept().then([this, &receiver](kj::Own<kj::AsyncIoStream> stream) {
      if (open_ >= options_.limits.max_connections) {
        auto text = kj::heap<std::string>(raw_response(
            {503, "unavailable", "too_many_connections",
             fmt::format("the console serves {} connections at most", options_.limits.max_connections)}));
        auto write = stream->write(text->data(), text->size());
        tasks_.add(io_.provider->getTimer()
                       .timeoutAfter(duration_of(options_.limits.client_timeout), kj::mv(write))
                       .attach(kj::mv(text), kj::mv(stream)));
      } else {
        ++open_;
        auto connection = kj::heap<Connection>(*this, kj::mv(stream));
        auto done = connection->run();
        tasks_.add(done.attach(kj::mv(connection), kj::defer([this] { --open_; })));
      }
      return accept_loop(receiver);
    });
  }

  kj::Timer& timer() { return io_.provider->getTimer(); }
  const kj::HttpHeaderTable& table() const { return *table_; }
  Console& console() { return console_; }
  const ServeOptions& options() const { return options_; }
  kj::HttpHeaderId authorization_, origin_, accept_;

 private:
  void taskFailed(kj::Exception&&) override {}  // a connection that broke: nothing to tell

  kj::AsyncIoContext& io_;
  Console& console_;
  const ServeOptions& options_;
  kj::Own<kj::HttpHeaderTable> table_;
  kj::TaskSet tasks_;
  std::size_t open_ = 0;
};

kj::HttpServerSettings settings_for(const ServeLimits& limits, kj::HttpServerErrorHandler& handler,
                                    kj::HttpServerCallbacks& callbacks) {
  kj::HttpServerSettings s;
  s.headerTimeout = duration_of(limits.client_timeout);
  s.pipelineTimeout = duration_of(std::min(limits.client_timeout, std::chrono::milliseconds(5000)));
  s.errorHandler = handler;
  s.callbacks = callbacks;
  return s;
}

Connection::Connection(ConsoleServer& owner, kj::Own<kj::AsyncIoStream> stream)
    : owner_(owner),
      stream_(kj::mv(stream)),
      settings_(settings_for(owner.options().limits, *this, *this)),
      http_(owner.timer(), owner.table(), *this, settings_) {}

kj::Promise<void> Connection::send(kj::HttpService::Response& response, server::Response answer) {
  kj::HttpHeaders headers(owner_.table());
  headers.set(kj::HttpHeaderId::CONTENT_TYPE, answer.content_type.c_str());
  headers.add("X-Content-Type-Options", "nosniff");
  headers.add("Referrer-Policy", "no-referrer");
  headers.add("X-Frame-Options", "DENY");
  if (answer.content_type.rfind("text/html", 0) == 0) {
    headers.add("Content-Security-Policy",
                "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
                "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'");
  }
  bool cache_set = false;
  for (const auto& [name, value] : answer.headers) {
    headers.add(name.c_str(), value.c_str());
    cache_set = cache_set || name == "Cache-Control";
  }
  if (!cache_set) headers.add("Cache-Control", "no-store");
  auto body = kj::heap<std::string>(std::move(answer.body));
  auto out = response.send(static_cast<uint>(answer.status), status_text(answer.status), headers,
                           static_cast<std::uint64_t>(body->size()));
  auto write = out->write(body->data(), body->size());
  auto sent = owner_.timer()
                  .timeoutAfter(duration_of(owner_.options().limits.client_timeout), kj::mv(write))
                  .attach(kj::mv(out), kj::mv(body));
  if (!close_after_response_) return sent;
  return sent.then([this] { stream_->shutdownWrite(); });
}

// Reads up to `max + 1` bytes of the body into `into`, from `at`.
kj::Promise<void> read_body(kj::AsyncInputStream& body, std::string& into, std::size_t at,
                            std::size_t max) {
  return body.tryRead(into.data() + at, 1, into.size() - at)
      .then([&body, &into, at, max](std::size_t n) -> kj::Promise<void> {
        if (n == 0) {
          into.resize(at);
          return kj::READY_NOW;
        }
        if (at + n > max) {
          into.resize(at + n);
          return kj::READY_NOW;
        }
        return read_body(body, into, at + n, max);
      });
}

kj::Promise<void> Connection::request(kj::HttpMethod method, kj::StringPtr url,
                                      const kj::HttpHeaders& headers, kj::AsyncInputStream& body,
                                      kj::HttpService::Response& response) {
  const ServeLimits& limits = owner_.options().limits;
  const auto refused = [&](int status, const char* reason, std::string message) {
    return send(response, server::Response{status, "application/json",
                                   error_json({status, "bad_request", reason, std::move(message)}),
                                   {}});
  };
  std::size_t header_bytes = url.size();
  headers.forEach([&](kj::StringPtr name, kj::StringPtr value) {
    header_bytes += name.size() + value.size() + 4;
  });
  if (header_bytes > limits.max_header_bytes) {
    return refused(431, "headers_too_large",
                   fmt::format("the request's URL and headers hold {} bytes: at most {}",
                               header_bytes, limits.max_header_bytes));
  }
  Request r;
  switch (method) {
    case kj::HttpMethod::GET: r.method = Method::get; break;
    case kj::HttpMethod::HEAD: r.method = Method::head; break;
    case kj::HttpMethod::POST: r.method = Method::post; break;
    default: r.method = Method::other; break;
  }
  r.method_name = kj::str(method).cStr();
  KJ_IF_MAYBE(parsed, kj::Url::tryParse(url, kj::Url::HTTP_REQUEST)) {
    for (const auto& segment : parsed->path) r.path.emplace_back(segment.cStr(), segment.size());
    for (const auto& q : parsed->query) {
      std::optional<std::string> value;
      if (q.value != nullptr) value = std::string(q.value.cStr(), q.value.size());
      r.query.emplace_back(std::string(q.name.cStr(), q.name.size()), std::move(value));
    }
  } else {
    return refused(400, "malformed_url", "the request's URL does not parse (a bad %-escape?)");
  }
  const auto header = [&](kj::HttpHeaderId id) -> std::optional<std::string> {
    KJ_IF_MAYBE(value, headers.get(id)) { return std::string(value->cStr(), value->size()); }
    return std::nullopt;
  };
  r.authorization = header(owner_.authorization_);
  r.origin = header(owner_.origin_);
  r.host = header(kj::HttpHeaderId::HOST);
  r.content_type = header(kj::HttpHeaderId::CONTENT_TYPE);
  r.accepts_html = header(owner_.accept_).value_or("").find("text/html") != std::string::npos;
  {
    std::string connection = header(kj::HttpHeaderId::CONNECTION).value_or("");
    for (auto& c : connection) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    close_after_response_ = connection.find("close") != std::string::npos;
  }
  // A page of a site that rebinds its name to this address would see our
  // pages as its own: on loopback, only a loopback Host is answered.
  if (owner_.options().listen.loopback && r.host && !is_loopback_host(*r.host)) {
    return refused(403, "host_not_allowed",
                   "this console listens on loopback: the Host header must name it");
  }
  std::uint64_t declared = 0;
  KJ_IF_MAYBE(length, body.tryGetLength()) { declared = *length; }
  if (declared > limits.max_body_bytes) {
    return refused(413, "body_too_large",
                   fmt::format("the request's body is {} bytes: at most {}", declared,
                               limits.max_body_bytes));
  }
  if (r.method != Method::post) return answer(response, std::move(r), body);
  auto request = kj::heap<Request>(std::move(r));
  request->body.resize(limits.max_body_bytes + 1);
  auto reading = owner_.timer().timeoutAfter(duration_of(limits.client_timeout),
                                             read_body(body, request->body, 0, limits.max_body_bytes));
  Request& pending = *request;
  return reading
      .then(
          [this, &response, &pending, &body, &limits]() -> kj::Promise<void> {
            if (pending.body.size() > limits.max_body_bytes) {
              return send(response, server::Response{413, "application/json",
                                             error_json({413, "bad_request", "body_too_large",
                                                         fmt::format("the request's body is over {} bytes",
                                                                     limits.max_body_bytes)}),
                                             {}});
            }
            return answer(response, std::move(pending), body);
          },
          [this, &response](kj::Exception&& e) -> kj::Promise<void> {
            if (e.getType() == kj::Exception::Type::DISCONNECTED) return kj::mv(e);
            return send(response, server::Response{408, "application/json",
                                           error_json({408, "bad_request", "timeout",
                                                       "the request's body did not arrive in time"}),
                                           {}});
          })
      .attach(kj::mv(request));
}

kj::Promise<void> Connection::answer(kj::HttpService::Response& response, Request request,
                                     kj::AsyncInputStream&) {
  // The store calls run here, to their end, before anything is written.
  server::Response result = owner_.console().handle(request);
  return send(response, std::move(result));
}

}  // namespace

void serve(ControlStore& store, const ServeOptions& options) {
  if (!options.listen.loopback && !options.have_token_file) {
    throw InvalidArgument(fmt::format(
        "--listen {}: an address other than loopback needs --token-file (anyone who can reach it "
        "could act)",
        options.listen.host));
  }
  kj::UnixEventPort::captureSignal(SIGTERM);
  kj::UnixEventPort::captureSignal(SIGINT);
  auto io = kj::setupAsyncIo();
  Console console(store, options);
  ConsoleServer server(io, console, options);
  const std::string where = fmt::format("{}:{}", options.listen.host, options.listen.port);
  kj::Own<kj::ConnectionReceiver> receiver;
  KJ_IF_MAYBE(problem, kj::runCatchingExceptions([&] {
                receiver = io.provider->getNetwork().parseAddress(where).wait(io.waitScope)->listen();
              })) {
    throw InvalidArgument(fmt::format("--listen {}: cannot listen there: {}", where,
                                      problem->getDescription().cStr()));
  }
  const std::string url = fmt::format("http://{}:{}", options.listen.host, receiver->getPort());
  if (options.on_listening) options.on_listening(url);
  auto stop = io.unixEventPort.onSignal(SIGTERM)
                  .ignoreResult()
                  .exclusiveJoin(io.unixEventPort.onSignal(SIGINT).ignoreResult());
  stop.exclusiveJoin(server.accept_loop(*receiver)).wait(io.waitScope);
}

}  // namespace cplane::server
