# Installation: `cmake --install <build> [--prefix DIR]` lays Braid out like a library.
#
#   lib/      libbraid.so, libnccl.so.2.30.7 with its links libnccl.so.2 and libnccl.so
#   include/  nccl.h, braid/*.h
#   bin/      braidrun, braid-info, braid-sim, braid-train, the perf suite (*_perf, membw...)
#   lib/cmake/Braid/   find_package(Braid): imported targets Braid::nccl and Braid::braid
#   lib/pkgconfig/     braid.pc (-lbraid) and nccl.pc (-lnccl), relocatable
#
# Installed programs find the libraries through RPATH $ORIGIN/../lib; the perf suite also
# keeps the path of the CUDA runtime it links.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(BRAID_NCCL_API_VERSION 2.30.7)
set(BRAID_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/Braid)

# Programs linking libbraid find it next door; the tools link the static archive.
set(braid_linked_programs "")
if(TARGET braid-train)
  list(APPEND braid_linked_programs braid-train)
endif()
if(BRAID_BUILD_PERF)
  list(APPEND braid_linked_programs ${BRAID_PERF_PROGRAMS})
endif()
set_target_properties(${braid_linked_programs} PROPERTIES
  INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}"
  INSTALL_RPATH_USE_LINK_PATH ON)
set(braid_install_programs braidrun braid-info braid-sim braid-switch braid-doctor
  ${braid_linked_programs})

# libnccl.so (the development link) too, so `-lnccl` finds Braid's.
install(TARGETS braid nccl EXPORT BraidTargets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS ${braid_install_programs} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/nccl.h ${PROJECT_SOURCE_DIR}/include/nccl_device.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/nccl_device DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/braid DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")

install(EXPORT BraidTargets NAMESPACE Braid:: DESTINATION ${BRAID_INSTALL_CMAKEDIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/BraidConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/BraidConfig.cmake INSTALL_DESTINATION ${BRAID_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/BraidConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cmake/BraidConfig.cmake
              ${PROJECT_BINARY_DIR}/cmake/BraidConfigVersion.cmake
        DESTINATION ${BRAID_INSTALL_CMAKEDIR})

foreach(pc braid nccl)
  configure_file(${CMAKE_CURRENT_LIST_DIR}/${pc}.pc.in ${PROJECT_BINARY_DIR}/pkgconfig/${pc}.pc
                 @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/pkgconfig/${pc}.pc
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endforeach()
