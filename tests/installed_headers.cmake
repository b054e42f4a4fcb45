# Installs the build BUILD_DIR into the scratch prefix PREFIX and fails if
# an installed header names the implementation: the storage contract, the
# event encoding, a database client library, or an internal header
# (`#include "..."`). The public headers are all a user compiles against;
# what is hidden behind ControlStore::Impl must stay hidden.
#
#   cmake -DBUILD_DIR=... -DPREFIX=... -P installed_headers.cmake
file(REMOVE_RECURSE "${PREFIX}")
execute_process(COMMAND "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${PREFIX}"
  RESULT_VARIABLE installed OUTPUT_QUIET)
if(NOT installed EQUAL 0)
  message(FATAL_ERROR "cmake --install into ${PREFIX} failed (${installed})")
endif()

file(GLOB_RECURSE headers LIST_DIRECTORIES false "${PREFIX}/include/*")
list(LENGTH headers count)
if(count EQUAL 0)
  message(FATAL_ERROR "no header was installed under ${PREFIX}/include")
endif()

set(forbidden "storage::|capnp|sqlite3|SQLite3|Backend|libpq|#include \"")
set(found "")
foreach(header IN LISTS headers)
  file(STRINGS "${header}" lines REGEX "${forbidden}")
  foreach(line IN LISTS lines)
    file(RELATIVE_PATH name "${PREFIX}/include" "${header}")
    string(APPEND found "\n  ${name}: ${line}")
  endforeach()
endforeach()
if(found)
  message(FATAL_ERROR "installed headers name the implementation "
                      "(${forbidden}):${found}")
endif()
message(STATUS "${count} installed headers, none naming the implementation")
