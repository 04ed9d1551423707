# rivet_add_transport(NAME SOURCES src... [LIBS lib...]): librivet-NAME.so,
# a transport plugin built as it would be out of tree: core's installed
# headers only (rivet-plugin-api), core reached through its services,
# every symbol resolved at link time (-Wl,--no-undefined) rather than at
# dlopen, and its ops table, rv_transport_ops, the one symbol it exports
# (hidden visibility). The test symbols-NAME checks that last.
function(rivet_add_transport name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS" ${ARGN})
  set(target rivet-${name})
  add_library(${target} MODULE ${T_SOURCES})
  target_include_directories(${target} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(${target} PRIVATE rivet-plugin-api ${T_LIBS})
  target_link_options(${target} PRIVATE -Wl,--no-undefined)
  set_target_properties(${target} PROPERTIES PREFIX "lib"
    C_VISIBILITY_PRESET hidden INSTALL_RPATH "$ORIGIN/..")
  install(TARGETS ${target} LIBRARY DESTINATION ${RIVET_PLUGIN_INSTALL_DIR})
  if(BUILD_TESTING)
    add_test(NAME symbols-${name}
      COMMAND ${PROJECT_SOURCE_DIR}/tests/symbols/check_plugin_symbols.sh
              $<TARGET_FILE:${target}>)
  endif()
endfunction()
