// The arrows check's self-test: a tool above the public API reaching into
// a layer's internals, and a database client library outside its engine.
#include <sqlite3.h>
#include "commands/control_store.hpp"
