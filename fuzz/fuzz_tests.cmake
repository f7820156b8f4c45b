# Registers a bounded libFuzzer run per fuzz target as a ctest test (label "fuzz").
# Seed corpora live in fuzz/corpus/<target>/ ; the run writes new inputs to a scratch copy.
file(GLOB _fuzzers CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/fuzz/fuzz_*.cpp)
set(SPECSERVE_FUZZ_SECONDS 20 CACHE STRING "Seconds each fuzz target runs inside ctest")
foreach(_f ${_fuzzers})
  get_filename_component(_n ${_f} NAME_WE)
  set(_work ${CMAKE_BINARY_DIR}/fuzz-work/${_n})
  add_test(NAME fuzz.${_n}
    COMMAND ${CMAKE_COMMAND} -E env ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1
      ${CMAKE_SOURCE_DIR}/scripts/run_fuzzer.sh ${SPECSERVE_FUZZ_BIN_DIR}/${_n} ${CMAKE_SOURCE_DIR}/fuzz/corpus/${_n} ${_work} ${SPECSERVE_FUZZ_SECONDS})
  set_tests_properties(fuzz.${_n} PROPERTIES LABELS "fuzz" TIMEOUT 300)
endforeach()
