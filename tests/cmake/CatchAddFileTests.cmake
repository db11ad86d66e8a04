# Run by oml_add_test_binary after its binary is built (cmake -P): writes CTEST_FILE, one ctest
# test per test source file instead of one per test case. A test process costs about a second
# before its first test runs (LibTorch registers its operators at load), which one process per
# case paid ~330 times for the core tests alone.
#
#   TEST_EXECUTABLE  the Catch2 binary           TEST_SPEC        a tag filter ("[faiss]", "~[faiss]")
#   TEST_PREFIX      "core:" (names: "<prefix> <file stem>[ (<TEST_SUFFIX>)]")
#   TEST_SUFFIX      "faiss" or empty             TEST_WORKING_DIR where the tests run
#   TEST_TIMEOUT     seconds per file            TEST_LABELS      ctest labels (may be empty)
#
# Catch's -# tags each case [#<source file stem>]; `--list-tags` under the spec gives the files
# that hold matching cases, so a file whose cases are all filtered out gets no test, and the
# `--warn NoTests` of each command fails a filter that no longer matches anything.
execute_process(
  COMMAND "${TEST_EXECUTABLE}" ${TEST_SPEC} "-#" --list-tags
  OUTPUT_VARIABLE output
  RESULT_VARIABLE result
  WORKING_DIRECTORY "${TEST_WORKING_DIR}")
if(result LESS 0 OR NOT output MATCHES "tags")
  message(FATAL_ERROR "listing the tags of ${TEST_EXECUTABLE} failed (${result}):\n${output}")
endif()
string(REGEX MATCHALL "\\[#[A-Za-z0-9_]+\\]" file_tags "${output}")
set(script "")
foreach(tag IN LISTS file_tags)
  string(REGEX REPLACE "^\\[#(.*)\\]$" "\\1" stem "${tag}")
  set(name "${TEST_PREFIX} ${stem}")
  if(TEST_SUFFIX)
    string(APPEND name " (${TEST_SUFFIX})")
  endif()
  string(APPEND script
         "add_test([==[${name}]==] [==[${TEST_EXECUTABLE}]==] \"-#\" [==[${tag}${TEST_SPEC}]==] --warn NoTests)\n"
         "set_tests_properties([==[${name}]==] PROPERTIES WORKING_DIRECTORY [==[${TEST_WORKING_DIR}]==]"
         " TIMEOUT ${TEST_TIMEOUT}")
  if(TEST_LABELS)
    string(APPEND script " LABELS ${TEST_LABELS}")
  endif()
  string(APPEND script ")\n")
endforeach()
file(WRITE "${CTEST_FILE}" "${script}")
