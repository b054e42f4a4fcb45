// cplane serve: the web console (server/, docs/console.md) on the store of
// --db. Its options are checked, and the token file read, before anything
// is opened; the listening address is printed on stdout once it listens.
#include <memory>

#include "cli/cli.hpp"
#include "server/console.hpp"

namespace cplane::cli {

namespace {
struct ServeArgs {
  server::ServeOptions options;
  std::optional<std::string> token_file;
};
}  // namespace

kj::MainFunc Cli::serve_command() {
  auto args = std::make_shared<ServeArgs>();
  return globals(kj::MainBuilder(
             context_, kVersionLine,
             "Serve the web console: the overview, items, an item's ledger, sessions and "
             "leases, projects, verify, /metrics and /api (JSON). Prints the address it listens "
             "on, then serves until SIGTERM or SIGINT (exit 0). Actions (release, retry, "
             "cancel, pause, resume, leave the terminal path) need a bearer token of "
             "--token-file, whose lines are `ACTOR TOKEN` (tokens of 16 characters or more; "
             "# comments); without one, or with --read-only, nothing is written. An address "
             "other than loopback needs --token-file."))
      .addOptionWithArg({"listen"},
                        [args](kj::StringPtr text) -> Validity {
                          try {
                            args->options.listen = server::parse_listen_address(text.cStr());
                          } catch (const InvalidArgument& e) {
                            return kj::str(e.what());
                          }
                          return true;
                        },
                        "<host:port>", "where to listen (default 127.0.0.1:8080; port 0: any free one)")
      .addOption({"read-only"},
                 [args]() -> Validity {
                   args->options.read_only = true;
                   return true;
                 },
                 "open the store for reading and refuse every action")
      .addOptionWithArg({"token-file"},
                        [args](kj::StringPtr text) -> Validity {
                          if (text.size() == 0) return "--token-file needs a path";
                          args->token_file = std::string(text.cStr());
                          return true;
                        },
                        "<file>", "the bearer tokens that may act: one `ACTOR TOKEN` a line")
      .addOptionWithArg({"client-timeout"},
                        [args](kj::StringPtr text) -> Validity {
                          auto v = parse_timeout(text);
                          if (!v || v->count() < 100) {
                            return "--client-timeout takes a number of seconds from 0.1 to 86400";
                          }
                          args->options.limits.client_timeout = *v;
                          return true;
                        },
                        "<seconds>",
                        "drop a client that takes longer to send its request or to read the "
                        "response (default 10)")
      .callAfterParsing([this, args]() -> Validity {
        return run([&] {
          server::ServeOptions& options = args->options;
          if (args->token_file) {
            options.tokens = server::read_token_file(*args->token_file);
            options.have_token_file = true;
          }
          if (!options.listen.loopback && !options.have_token_file) {
            throw InvalidArgument(fmt::format(
                "--listen {}: an address other than loopback needs --token-file", options.listen.host));
          }
          auto store = open(options.read_only ? Access::read : Access::write);
          options.on_listening = [&](const std::string& url) {
            std::cout << "listening on " << url << std::endl;
            std::cerr << fmt::format("cplane serve: {}{}; stop with SIGTERM or Ctrl-C\n",
                                     options.read_only ? "read-only" : "actions need a token",
                                     options.have_token_file
                                         ? fmt::format(" ({} token(s))", options.tokens.size())
                                         : std::string(options.read_only ? "" : " file: none given, so none is taken"));
          };
          server::serve(store, options);
        });
      })
      .build();
}

}  // namespace cplane::cli
