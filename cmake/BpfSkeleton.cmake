# BPF programs compiled to a libbpf skeleton (libbpf-tools style):
#   NAME.bpf.c --clang -target bpf--> NAME.bpf.o --bpftool gen skeleton--> NAME.skel.h
#
# parcagpu_bpf_toolchain(<out-var>) sets <out-var> TRUE when clang, bpftool, libbpf and libelf
# headers are all there (else FALSE, with the missing piece in <out-var>_MISSING).
# parcagpu_bpf_skeleton(TARGET <target> SOURCE <x.bpf.c> NAME <skel-name> [DEPENDS headers...])
# adds a custom target <target> that produces ${CMAKE_CURRENT_BINARY_DIR}/<skel-name>.skel.h.
include_guard(GLOBAL)

function(parcagpu_bpf_toolchain out)
  find_program(PARCAGPU_BPF_CLANG NAMES clang clang-18 clang-17 clang-16 clang-15 clang-14)
  find_program(PARCAGPU_BPFTOOL NAMES bpftool PATHS /usr/sbin /usr/local/sbin)
  find_program(PARCAGPU_LLVM_STRIP NAMES llvm-strip llvm-strip-18 llvm-strip-17 llvm-strip-16
                                         llvm-strip-15 llvm-strip-14)
  find_path(LIBBPF_INCLUDE_DIR bpf/usdt.bpf.h)
  find_path(LIBELF_INCLUDE_DIR gelf.h)
  foreach(_req PARCAGPU_BPF_CLANG PARCAGPU_BPFTOOL LIBBPF_INCLUDE_DIR LIBELF_INCLUDE_DIR)
    if(NOT ${_req})
      set(${out} FALSE PARENT_SCOPE)
      set(${out}_MISSING ${_req} PARENT_SCOPE)
      return()
    endif()
  endforeach()
  if(NOT CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64|amd64|aarch64|arm64")
    set(${out} FALSE PARENT_SCOPE)
    set(${out}_MISSING "a supported architecture (x86_64, arm64)" PARENT_SCOPE)
    return()
  endif()
  set(${out} TRUE PARENT_SCOPE)
endfunction()

function(parcagpu_bpf_skeleton)
  cmake_parse_arguments(B "" "TARGET;SOURCE;NAME" "DEPENDS" ${ARGN})
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64|amd64")
    set(_arch x86)
  else()
    set(_arch arm64)
  endif()
  # The host's system include directories (asm/ptrace.h etc.): clang -target bpf does not search
  # the multiarch directories by itself.
  execute_process(COMMAND ${PARCAGPU_BPF_CLANG} -v -E -x c /dev/null -o /dev/null
                  ERROR_VARIABLE _clang_v OUTPUT_QUIET)
  set(_sys)
  set(_in FALSE)
  string(REPLACE "\n" ";" _lines "${_clang_v}")
  foreach(_line IN LISTS _lines)
    if(_line MATCHES "search starts here")
      set(_in TRUE)
    elseif(_line MATCHES "End of search list")
      set(_in FALSE)
    elseif(_in)
      string(STRIP "${_line}" _dir)
      list(APPEND _sys -idirafter ${_dir})
    endif()
  endforeach()
  get_filename_component(_src ${B_SOURCE} ABSOLUTE)
  get_filename_component(_srcdir ${_src} DIRECTORY)
  set(_obj ${CMAKE_CURRENT_BINARY_DIR}/${B_NAME}.bpf.o)
  set(_skel ${CMAKE_CURRENT_BINARY_DIR}/${B_NAME}.skel.h)
  set(_strip)
  if(PARCAGPU_LLVM_STRIP)
    set(_strip COMMAND ${PARCAGPU_LLVM_STRIP} -g ${_obj})  # DWARF only; BTF stays
  endif()
  add_custom_command(
    OUTPUT ${_obj}
    COMMAND ${PARCAGPU_BPF_CLANG} -g -O2 -target bpf -D__TARGET_ARCH_${_arch} -Wall
            -Werror=implicit-function-declaration
            -I${PROJECT_SOURCE_DIR}/include -I${_srcdir} -I${LIBBPF_INCLUDE_DIR} ${_sys}
            -c ${_src} -o ${_obj}
    ${_strip}
    DEPENDS ${_src} ${B_DEPENDS}
    COMMENT "BPF object ${B_NAME}.bpf.o"
    VERBATIM)
  add_custom_command(
    OUTPUT ${_skel}
    COMMAND ${PARCAGPU_BPFTOOL} gen skeleton ${_obj} name ${B_NAME}_bpf > ${_skel}
    DEPENDS ${_obj}
    COMMENT "BPF skeleton ${B_NAME}.skel.h"
    VERBATIM)
  add_custom_target(${B_TARGET} DEPENDS ${_skel})
endfunction()
