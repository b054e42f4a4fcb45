# The layers' arrows (DESIGN.md "Layers and folders"), enforced on the
# sources: every `#include "dir/..."` of an internal header must point to
# the including folder itself or to a layer below it, and only the engines
# (and the raw baselines, and tests) include a database client library.
#
#   cmake -DSOURCE_DIR=<tree> -P cmake/check_arrows.cmake
#
# Fails (exit 1) with one line per upward include. Run at every build (the
# cplane_check_arrows target) and by ctest, with a self-test on a tree that
# includes upwards (cmake/arrows_fixture/), which must fail.
cmake_minimum_required(VERSION 3.25)
if(NOT SOURCE_DIR)
  message(FATAL_ERROR "check_arrows.cmake: set -DSOURCE_DIR")
endif()

# folder -> the include prefixes its files may use ("*": any). The contract
# (storage/*.hpp) is "storage/" minus the engines, spelled "storage/:" below.
set(allowed_events       "events/")
set(allowed_projections  "projections/;events/")
set(allowed_storage      "storage/:;projections/;events/")
set(allowed_storage/sqlite   "storage/sqlite/;storage/:;projections/;events/")
set(allowed_storage/postgres "storage/postgres/;storage/:;projections/;events/")
set(allowed_commands     "commands/;storage/;projections/;events/")
set(allowed_verify       "verify/;storage/;projections/;events/")
set(allowed_recovery     "recovery/;verify/;storage/;projections/;events/")
set(allowed_archive      "archive/;verify/;storage/;projections/;events/")
set(allowed_library      "library/;commands/;verify/;recovery/;archive/;storage/;projections/;events/")
set(allowed_include      "")
set(allowed_examples     "")
set(allowed_server       "server/;json/")
set(allowed_python       "python/")
set(allowed_json         "json/;events/json.hpp;events/errors.hpp")
set(allowed_cli          "cli/;json/")
set(allowed_probe        "probe/;json/")
set(allowed_bench        "bench/;probe/fleet.hpp;json/")
set(allowed_tests        "*")
# Named internal interfaces a tool above the public API may use, file by
# file (the exceptions DESIGN.md grants, and the debts still to repay).
set(exceptions
  # the one factory names every engine
  "storage/open_store.cpp:storage/sqlite/"
  "storage/open_store.cpp:storage/postgres/"
  # cli: the JSON reader/writer of events, the error types it maps to exit
  # codes, and the store's URL and side-file rules (storage/open.hpp)
  "cli/:events/json.hpp"
  "cli/:events/errors.hpp"
  "cli/:storage/open.hpp"
  # cli/serve.cpp: the console's entry point (server/ is a tool above the
  # public API, as cli/ is)
  "cli/serve.cpp:server/console.hpp"
  # probe: the fault drills' interface, and (to be routed through it) the
  # backend, the group-commit area and SQLite's integrity check it inspects,
  # and the event codec (cron-race reads a schedule's stream, which no
  # public call returns)
  "probe/:commands/testing.hpp"
  "probe/:events/codec.hpp"
  "probe/:events/clock.hpp"
  "probe/:projections/apply.hpp"
  "probe/:projections/rules.hpp"
  "probe/:storage/backend.hpp"
  "probe/:storage/open.hpp"
  "probe/:storage/sqlite/combine_area.hpp"
  "probe/:storage/sqlite/sqlite_backend.hpp")
# Client libraries: who may include them.
set(client_sqlite3.h  "storage/sqlite/;bench/sqlite_raw.cpp;tests/")
set(client_libpq-fe.h "storage/postgres/;bench/pg_raw.cpp;tests/")

set(folders events projections storage/sqlite storage/postgres storage commands verify recovery
    archive library include examples server python json cli probe bench tests)
set(not_sources cmake scripts docs .ci .git)

file(GLOB_RECURSE files RELATIVE "${SOURCE_DIR}" LIST_DIRECTORIES false
  "${SOURCE_DIR}/*.cpp" "${SOURCE_DIR}/*.hpp" "${SOURCE_DIR}/*.h" "${SOURCE_DIR}/*.cc")
set(problems "")
set(checked 0)
foreach(file IN LISTS files)
  string(REGEX MATCH "^[^/]+" top "${file}")
  if(top IN_LIST not_sources)
    continue()
  endif()
  # A build tree inside the source tree (CMakeCache.txt at its root).
  if(EXISTS "${SOURCE_DIR}/${top}/CMakeCache.txt")
    continue()
  endif()
  set(folder "")
  foreach(f IN LISTS folders)
    if(file MATCHES "^${f}/")
      set(folder "${f}")
      break()
    endif()
  endforeach()
  if(folder STREQUAL "")
    list(APPEND problems "${file}: in a folder the arrows table (cmake/check_arrows.cmake) does not name")
    continue()
  endif()
  math(EXPR checked "${checked} + 1")
  file(STRINGS "${SOURCE_DIR}/${file}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]")
  foreach(line IN LISTS lines)
    if(line MATCHES "^[ \t]*#[ \t]*include[ \t]*<([^>]+)>")
      set(header "${CMAKE_MATCH_1}")
      if(DEFINED client_${header})
        set(ok FALSE)
        foreach(who IN LISTS client_${header})
          string(FIND "${file}" "${who}" at)
          if(at EQUAL 0)
            set(ok TRUE)
          endif()
        endforeach()
        if(NOT ok)
          list(APPEND problems "${file}: includes <${header}>: only its engine may")
        endif()
      endif()
      continue()
    endif()
    if(NOT line MATCHES "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\"")
      continue()
    endif()
    set(header "${CMAKE_MATCH_1}")
    if(NOT header MATCHES "/")
      continue()  # a sibling ("fleet.hpp") or a generated file beside the source
    endif()
    set(ok FALSE)
    foreach(prefix IN LISTS allowed_${folder})
      if(prefix STREQUAL "*")
        set(ok TRUE)
      elseif(prefix STREQUAL "storage/:")
        # the contract: storage/<file>, not an engine's folder
        if(header MATCHES "^storage/[^/]+$")
          set(ok TRUE)
        endif()
      else()
        string(FIND "${header}" "${prefix}" at)
        if(at EQUAL 0)
          set(ok TRUE)
        endif()
      endif()
    endforeach()
    if(NOT ok)
      foreach(exception IN LISTS exceptions)
        string(REGEX MATCH "^([^:]+):(.+)$" _ "${exception}")
        set(who "${CMAKE_MATCH_1}")
        set(what "${CMAKE_MATCH_2}")
        string(FIND "${file}" "${who}" at_file)
        string(FIND "${header}" "${what}" at_header)
        if(at_file EQUAL 0 AND at_header EQUAL 0)
          set(ok TRUE)
        endif()
      endforeach()
    endif()
    if(NOT ok)
      string(REPLACE ";" ", " may "${allowed_${folder}}")
      list(APPEND problems "${file}: includes \"${header}\": ${folder}/ may include only ${may} (DESIGN.md, Layers and folders)")
    endif()
  endforeach()
endforeach()

if(checked EQUAL 0)
  message(FATAL_ERROR "check_arrows.cmake: no sources under ${SOURCE_DIR}")
endif()
if(problems)
  list(LENGTH problems n)
  string(REPLACE ";" "\n  " text "${problems}")
  message(FATAL_ERROR "${n} include(s) against the layers' arrows:\n  ${text}")
endif()
message(STATUS "the layers' arrows hold: ${checked} files")
