# cmake -DREADELF=... -DLIB=... -DOUT=... -P build_id.cmake: writes LIB's GNU build ID (hex).
execute_process(COMMAND ${READELF} -n ${LIB} OUTPUT_VARIABLE _notes RESULT_VARIABLE _rc)
string(REGEX MATCH "Build ID: ([0-9a-f]+)" _m "${_notes}")
if(NOT _rc EQUAL 0 OR NOT CMAKE_MATCH_1)
  message(FATAL_ERROR "no GNU build ID in ${LIB} (link with --build-id)")
endif()
file(WRITE ${OUT} "${CMAKE_MATCH_1}\n")
