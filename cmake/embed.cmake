# hn_embed(OUT SCRIPT COMMENT FILES f... [DEFINES NAME=VALUE...]): generates
# the C file OUT from FILES by running the -P script SCRIPT (embed_lua.cmake,
# embed_profiles.cmake) with -DOUT, -DLIST (the files, one a line) and the
# DEFINES. The list goes through a file so that adding or removing a file
# re-runs the embedding (a changed glob alone would not).
function(hn_embed out script comment)
  cmake_parse_arguments(EMBED "" "" "FILES;DEFINES" ${ARGN})
  set(list ${out}.list)
  string(REPLACE ";" "\n" text "${EMBED_FILES}")
  file(CONFIGURE OUTPUT ${list} CONTENT "${text}\n")
  set(defines "")
  foreach(d ${EMBED_DEFINES})
    list(APPEND defines -D${d})
  endforeach()
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DOUT=${out} -DLIST=${list} ${defines} -P ${script}
    DEPENDS ${EMBED_FILES} ${list} ${script} ${CMAKE_SOURCE_DIR}/cmake/embed_bytes.cmake
    COMMENT "${comment}")
endfunction()
