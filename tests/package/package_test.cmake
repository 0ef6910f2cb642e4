# CTest driver (cmake -P) for the installed package. MODE:
#   install          install the build tree into a temporary prefix; the installed bin/attnjit runs;
#                    pkg-config attnjit builds a C program; find_package(attnjit) builds
#                    tests/package/consumer, which runs.
#   add_subdirectory the same consumer with attnjit as a subdirectory (tests default off there).
# Inputs: SOURCE_DIR, BUILD_DIR, WORK_DIR, VERSION, GENERATOR, LAUNCHER (compiler launcher or "").
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "$ ${ARGN}\n${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (exit ${rc}): ${ARGN}")
  endif()
  set(LAST_OUTPUT "${out}" PARENT_SCOPE)
endfunction()

set(consumer ${SOURCE_DIR}/tests/package/consumer)
set(launch "")
if(LAUNCHER)
  set(launch -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER} -DCMAKE_C_COMPILER_LAUNCHER=${LAUNCHER})
endif()
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

if(MODE STREQUAL "install")
  set(prefix ${WORK_DIR}/prefix)
  run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
  foreach(f include/attnjit/attnjit.h include/attnjit/runtime.hpp lib/cmake/attnjit/attnjitConfig.cmake
            lib/cmake/attnjit/attnjitConfigVersion.cmake lib/pkgconfig/attnjit.pc bin/attnjit)
    if(NOT EXISTS ${prefix}/${f})
      message(FATAL_ERROR "not installed: ${f}")
    endif()
  endforeach()
  file(GLOB sonames ${prefix}/lib/libattnjit.so.*)
  if(NOT sonames)
    message(FATAL_ERROR "no versioned libattnjit.so.* installed")
  endif()
  # The installed CLI finds the installed library through its RUNPATH ($ORIGIN/../lib).
  run(${prefix}/bin/attnjit info --op paged_kv_write)
  # pkg-config
  set(ENV{PKG_CONFIG_PATH} ${prefix}/lib/pkgconfig)
  run(pkg-config --modversion attnjit)
  string(STRIP "${LAST_OUTPUT}" pc_version)
  if(NOT pc_version STREQUAL VERSION)
    message(FATAL_ERROR "pkg-config attnjit: version ${pc_version}, expected ${VERSION}")
  endif()
  run(pkg-config --cflags --libs attnjit)
  string(STRIP "${LAST_OUTPUT}" pc_flags)
  separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
  run(cc ${SOURCE_DIR}/tests/package/c_consumer.c ${pc_flags} -Wl,-rpath,${prefix}/lib -o ${WORK_DIR}/c_consumer)
  run(${WORK_DIR}/c_consumer ${VERSION})
  # find_package
  run(${CMAKE_COMMAND} -S ${consumer} -B ${WORK_DIR}/find -G ${GENERATOR} -DCMAKE_BUILD_TYPE=Release
      -DCMAKE_PREFIX_PATH=${prefix} ${launch})
  run(${CMAKE_COMMAND} --build ${WORK_DIR}/find)
  run(${WORK_DIR}/find/consumer)
elseif(MODE STREQUAL "add_subdirectory")
  run(${CMAKE_COMMAND} -S ${consumer} -B ${WORK_DIR}/sub -G ${GENERATOR} -DCMAKE_BUILD_TYPE=Release
      -DATTNJIT_SOURCE_DIR=${SOURCE_DIR} ${launch})
  run(${CMAKE_COMMAND} --build ${WORK_DIR}/sub --target consumer -j 2)
  run(${WORK_DIR}/sub/consumer)
else()
  message(FATAL_ERROR "MODE must be install or add_subdirectory, got '${MODE}'")
endif()
message(STATUS "package test ${MODE}: passed")
