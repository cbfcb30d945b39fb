# Install rules and the Debian package (cpack -G DEB).
#
#   lib/<multiarch>/parcagpu/libparcagpu.so         stripped; what CUDA_INJECTION64_PATH names
#   lib/<multiarch>/parcagpu/libparcagpucupti.so    -> libparcagpu.so (the upstream library's name)
#   lib/debug/.build-id/xx/yyyy.debug               its debug info (gdb, elfutils find it by build ID)
#   bin/parcagpu-trace
#   include/parcagpu/abi.h, cbid_table.h            the probe ABI for other consumers
#   share/parcagpu/parcagpu.bt                      the bpftrace script
#   share/doc/parcagpu/                             README, LICENSE, docs
#   lib/<multiarch>/parcagpu/demo/                  mock CUDA + app + demo.sh (no GPU needed)

# The release library: build/lib/libparcagpu.so stripped of debug info and unneeded symbols
# (its SDT notes and semaphores stay: they are what consumers attach to), with a
# .gnu_debuglink to the separate debug file, which is also placed under its build ID.
find_program(PARCAGPU_OBJCOPY NAMES objcopy REQUIRED)
find_program(PARCAGPU_READELF NAMES readelf REQUIRED)
set(PARCAGPU_DIST ${CMAKE_BINARY_DIR}/dist)
add_custom_command(
  OUTPUT ${PARCAGPU_DIST}/libparcagpu.so ${PARCAGPU_DIST}/libparcagpu.so.debug
         ${PARCAGPU_DIST}/build-id.txt
  COMMAND ${CMAKE_COMMAND} -E make_directory ${PARCAGPU_DIST}
  COMMAND ${PARCAGPU_OBJCOPY} --only-keep-debug $<TARGET_FILE:parcagpu> ${PARCAGPU_DIST}/libparcagpu.so.debug
  COMMAND ${PARCAGPU_OBJCOPY} --strip-debug --strip-unneeded
          --add-gnu-debuglink=${PARCAGPU_DIST}/libparcagpu.so.debug
          $<TARGET_FILE:parcagpu> ${PARCAGPU_DIST}/libparcagpu.so
  COMMAND ${CMAKE_COMMAND} -DREADELF=${PARCAGPU_READELF} -DLIB=${PARCAGPU_DIST}/libparcagpu.so
          -DOUT=${PARCAGPU_DIST}/build-id.txt -P ${PROJECT_SOURCE_DIR}/cmake/build_id.cmake
  DEPENDS parcagpu ${PROJECT_SOURCE_DIR}/cmake/build_id.cmake
  COMMENT "Release library dist/libparcagpu.so (stripped) and its debug file"
  VERBATIM)
add_custom_target(parcagpu_release ALL DEPENDS ${PARCAGPU_DIST}/libparcagpu.so)

set(PARCAGPU_LIBDIR ${CMAKE_INSTALL_LIBDIR}/parcagpu)
install(FILES ${PARCAGPU_DIST}/libparcagpu.so DESTINATION ${PARCAGPU_LIBDIR} COMPONENT parcagpu
        PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
install(CODE "
  file(STRINGS \"${PARCAGPU_DIST}/build-id.txt\" _id)
  string(SUBSTRING \"\${_id}\" 0 2 _dir)
  string(SUBSTRING \"\${_id}\" 2 -1 _rest)
  file(INSTALL \"${PARCAGPU_DIST}/libparcagpu.so.debug\"
       DESTINATION \"\${CMAKE_INSTALL_PREFIX}/lib/debug/.build-id/\${_dir}\"
       RENAME \"\${_rest}.debug\" PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
  file(CREATE_LINK libparcagpu.so
       \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${PARCAGPU_LIBDIR}/libparcagpucupti.so\" SYMBOLIC)
  message(STATUS \"Installing: \$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${PARCAGPU_LIBDIR}/libparcagpucupti.so -> libparcagpu.so\")
" COMPONENT parcagpu)

install(FILES include/parcagpu/abi.h include/parcagpu/cbid_table.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/parcagpu COMPONENT parcagpu)
install(FILES scripts/parcagpu.bt DESTINATION ${CMAKE_INSTALL_DATADIR}/parcagpu COMPONENT parcagpu)
install(FILES README.md LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT parcagpu)
install(FILES tools/trace/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR} RENAME parcagpu-trace.md
        COMPONENT parcagpu)
if(EXISTS ${PROJECT_SOURCE_DIR}/docs)
  install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs COMPONENT parcagpu
          FILES_MATCHING PATTERN "*.md")
endif()

# The demo without a GPU: the mock driver and CUPTI next to the mock app (its RUNPATH and its
# re-exec look in ../mock), and the script, which finds the library and the tool from there.
install(TARGETS parcagpu-mockapp RUNTIME DESTINATION ${PARCAGPU_LIBDIR}/demo/bin COMPONENT parcagpu)
install(TARGETS parcagpu_mock_cuda parcagpu_mock_cupti
        LIBRARY DESTINATION ${PARCAGPU_LIBDIR}/demo/mock COMPONENT parcagpu)
# Not libcupti.so.12: once a link to libcupti.so.13, it is now a second build of the mock CUPTI
# (4.9 MB unstripped) that only the tests' CUDA 12 personality loads; the demo runs CUDA 13's.
install(PROGRAMS scripts/demo.sh DESTINATION ${PARCAGPU_LIBDIR}/demo COMPONENT parcagpu)
# The programs without their debug info (the library's is kept apart, above).
install(CODE "
  foreach(_f bin/parcagpu-trace ${PARCAGPU_LIBDIR}/demo/bin/parcagpu-mockapp
             ${PARCAGPU_LIBDIR}/demo/mock/libcuda.so.1 ${PARCAGPU_LIBDIR}/demo/mock/libcupti.so.13)
    set(_p \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/\${_f}\")
    if(EXISTS \${_p})
      execute_process(COMMAND ${PARCAGPU_OBJCOPY} --strip-debug \${_p})
    endif()
  endforeach()
" COMPONENT parcagpu)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME parcagpu)
set(CPACK_PACKAGE_VENDOR "parcagpu")
set(CPACK_PACKAGE_CONTACT "parcagpu maintainers <parcagpu@users.noreply.github.com>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_DESCRIPTION "libparcagpu.so is injected into CUDA programs (CUDA_INJECTION64_PATH) \
and announces kernel launches and their GPU timing on USDT probes for an eBPF profiler (Parca's \
agent). parcagpu-trace shows GPU time by CPU launch stack. A demo runs without a GPU.")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "${PROJECT_HOMEPAGE_URL}")
# Dependencies from the binaries (dpkg-shlibdeps); the demo's mock libraries are private.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CMAKE_BINARY_DIR}/mock)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "bpftrace")
set(CPACK_STRIP_FILES OFF)  # the library is stripped above, keeping its debug link
include(CPack)
