# Packaging: a pkg-config file and a CMake package, both relocatable.
configure_file(${PROJECT_SOURCE_DIR}/cmake/rivet.pc.in
               ${PROJECT_BINARY_DIR}/rivet.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/rivet.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

include(CMakePackageConfigHelpers)
install(EXPORT rivet-targets NAMESPACE rivet::
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/rivet)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/rivet-config.cmake.in
  ${PROJECT_BINARY_DIR}/rivetConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/rivet)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/rivetConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/rivetConfig.cmake
              ${PROJECT_BINARY_DIR}/rivetConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/rivet)
