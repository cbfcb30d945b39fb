# Install rules and the Debian packages (cpack -G DEB), one per component:
#
#   parcagpu (the product)
#     lib/parcagpu/libparcagpu.so                   stripped; what CUDA_INJECTION64_PATH names
#     lib/parcagpu/libparcagpucupti.so              -> libparcagpu.so (the upstream library's name)
#     lib/debug/.build-id/xx/yyyy.debug             its debug info (gdb, elfutils find it by build ID)
#     bin/parcagpu-trace
#     share/parcagpu/parcagpu.bt                    the bpftrace script
#     share/doc/parcagpu/                           README, the tool's README, the user's docs,
#                                                   copyright, changelog.Debian.gz
#   parcagpu-dev
#     include/parcagpu/abi.h, cbid_table.h          the probe ABI for other consumers
#   parcagpu-demo
#     lib/parcagpu/demo/                            mock CUDA + app + demo.sh (no GPU needed)
#
# scripts/check-package.sh lists what each package holds and fails on anything else.

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
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/parcagpu COMPONENT dev)
install(PROGRAMS scripts/parcagpu.bt DESTINATION ${CMAKE_INSTALL_DATADIR}/parcagpu COMPONENT parcagpu)
# The docs a user reads: how to run and deploy it, the design, the probe ABI, and the CUPTI facts
# the settings cite. Not docs/ARCHITECTURE.md and docs/testing.md (the source and its tests), nor
# docs/measurements/ (summaries of the runs behind the figures; their raw outputs are on the branch
# measurements-raw).
set(PARCAGPU_USER_DOCS docs/how-it-works.md docs/deploying.md docs/probe-abi.md
                       docs/cupti-facts.md docs/pc-sampling.md)
install(FILES README.md DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT parcagpu)
install(FILES tools/trace/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR} RENAME parcagpu-trace.md
        COMPONENT parcagpu)
install(FILES ${PARCAGPU_USER_DOCS} DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs COMPONENT parcagpu)
# What Debian expects of every package: the licence (Apache-2.0, LICENSE) in the machine-readable
# copyright format, and the changelog, compressed (each package's directory gets both).
set(PARCAGPU_DEB_RELEASE 1)
set(PARCAGPU_DEB_VERSION ${PROJECT_VERSION}-${PARCAGPU_DEB_RELEASE})
set(PARCAGPU_DEB_DIR ${CMAKE_BINARY_DIR}/debian)
add_custom_command(
  OUTPUT ${PARCAGPU_DEB_DIR}/changelog.Debian.gz
  COMMAND ${CMAKE_COMMAND} -DIN=${PROJECT_SOURCE_DIR}/cmake/debian/changelog
          -DVERSION=${PARCAGPU_DEB_VERSION} -DOUT=${PARCAGPU_DEB_DIR}/changelog.Debian.gz
          -P ${PROJECT_SOURCE_DIR}/cmake/debian/changelog.cmake
  DEPENDS ${PROJECT_SOURCE_DIR}/cmake/debian/changelog ${PROJECT_SOURCE_DIR}/cmake/debian/changelog.cmake
  COMMENT "changelog.Debian.gz"
  VERBATIM)
add_custom_target(parcagpu_deb_changelog ALL DEPENDS ${PARCAGPU_DEB_DIR}/changelog.Debian.gz)
foreach(_component parcagpu dev demo)
  set(_package parcagpu)
  if(NOT _component STREQUAL parcagpu)
    set(_package parcagpu-${_component})
  endif()
  install(FILES cmake/debian/copyright ${PARCAGPU_DEB_DIR}/changelog.Debian.gz
          DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${_package} COMPONENT ${_component})
endforeach()

# The demo without a GPU: the mock driver and CUPTI next to the mock app (its RUNPATH and its
# re-exec look in ../mock), and the script, which finds the library and the tool from there.
install(TARGETS parcagpu-mockapp RUNTIME DESTINATION ${PARCAGPU_LIBDIR}/demo/bin COMPONENT demo)
install(TARGETS parcagpu_mock_cuda parcagpu_mock_cupti
        LIBRARY DESTINATION ${PARCAGPU_LIBDIR}/demo/mock COMPONENT demo)
# Not libcupti.so.12: once a link to libcupti.so.13, it is now a second build of the mock CUPTI
# (4.9 MB unstripped) that only the tests' CUDA 12 personality loads; the demo runs CUDA 13's.
install(PROGRAMS scripts/demo.sh DESTINATION ${PARCAGPU_LIBDIR}/demo COMPONENT demo)
# The programs stripped (the library's debug info is kept apart, above), in each component's own
# install step (a component's package runs only its own). The demo's app keeps its symbol table,
# not its debug info: the demo shows launch stacks by the app's function names
# (cmake/debian/parcagpu-demo.lintian-overrides says so to lintian).
install(CODE "
  execute_process(COMMAND ${PARCAGPU_OBJCOPY} --strip-unneeded
                  \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/bin/parcagpu-trace\")
" COMPONENT parcagpu)
install(CODE "
  set(_demo \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${PARCAGPU_LIBDIR}/demo\")
  execute_process(COMMAND ${PARCAGPU_OBJCOPY} --strip-debug \${_demo}/bin/parcagpu-mockapp)
  execute_process(COMMAND ${PARCAGPU_OBJCOPY} --strip-unneeded \${_demo}/mock/libcuda.so.1)
  execute_process(COMMAND ${PARCAGPU_OBJCOPY} --strip-unneeded \${_demo}/mock/libcupti.so.13)
" COMPONENT demo)
# What lintian is told on purpose, each with its reason (cmake/debian/*.lintian-overrides).
foreach(_package parcagpu parcagpu-dev parcagpu-demo)
  string(REPLACE "parcagpu-" "" _component ${_package})
  install(FILES cmake/debian/${_package}.lintian-overrides DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/lintian/overrides
          RENAME ${_package} COMPONENT ${_component})
endforeach()

set(CPACK_GENERATOR DEB)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL parcagpu dev demo)
set(CPACK_PACKAGE_NAME parcagpu)
set(CPACK_PACKAGE_VENDOR "parcagpu")
# No address outside this project's own: the developers, on the machine that built it.
set(CPACK_PACKAGE_CONTACT "parcagpu developers <parcagpu@localhost>")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE ${PARCAGPU_DEB_RELEASE})
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "${PROJECT_HOMEPAGE_URL}")
# Dependencies from the binaries (dpkg-shlibdeps); the demo's mock libraries are private.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CMAKE_BINARY_DIR}/mock)
set(CPACK_STRIP_FILES OFF)  # the library is stripped above, keeping its debug link

set(CPACK_DEBIAN_PARCAGPU_PACKAGE_NAME parcagpu)
set(CPACK_DEBIAN_PARCAGPU_PACKAGE_RECOMMENDS "bpftrace")
# Each package's description: its first line is its synopsis. CPack puts a summary line before it
# unless the summary is CPack's own default (a project description is not): so it is that.
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${CMAKE_PROJECT_NAME} built using CMake")
set(CPACK_DEBIAN_PARCAGPU_DESCRIPTION "${PROJECT_DESCRIPTION}
libparcagpu.so is injected into CUDA programs (CUDA_INJECTION64_PATH) and
announces kernel launches and their GPU timing on USDT probes for an eBPF
profiler (Parca's agent). parcagpu-trace shows GPU time by CPU launch stack.")
set(CPACK_DEBIAN_DEV_PACKAGE_NAME parcagpu-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_ARCHITECTURE all)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "parcagpu (= ${PARCAGPU_DEB_VERSION})")
set(CPACK_DEBIAN_DEV_DESCRIPTION "parcagpu's probe ABI, for eBPF consumers of its probes
The C headers of the probes libparcagpu.so fires (abi.h: provider, names,
argument and record layouts) and of the CUPTI callbacks it subscribes to
(cbid_table.h), for consumers other than parcagpu-trace.")
set(CPACK_DEBIAN_DEMO_PACKAGE_NAME parcagpu-demo)
set(CPACK_DEBIAN_DEMO_PACKAGE_DEPENDS "parcagpu (= ${PARCAGPU_DEB_VERSION})")
set(CPACK_DEBIAN_DEMO_DESCRIPTION "parcagpu demo without a GPU
A mock CUDA driver, a mock CUPTI and a mock CUDA application that run
libparcagpu.so with parcagpu-trace attached, and demo.sh, which says what
was launched, announced and matched, and shows GPU time by launch stack.")
include(CPack)
