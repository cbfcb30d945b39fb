# The Debian changelog of the packages (cmake/debian/changelog), its newest entry for the version
# being packaged, gzip-compressed without a timestamp so that the same source gives the same file.
#   cmake -DIN=changelog -DVERSION=0.1.0-1 -DOUT=changelog.Debian.gz -P changelog.cmake
configure_file(${IN} ${OUT}.txt @ONLY)
execute_process(COMMAND gzip -9 -n -c ${OUT}.txt OUTPUT_FILE ${OUT} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gzip ${OUT}.txt: ${rc}")
endif()
