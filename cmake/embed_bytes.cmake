# Included by the embed_*.cmake scripts: embed_file_bytes(FILE BYTES LEN)
# sets BYTES to FILE's content as a C initializer list ending in a 0 byte
# ("0x2d,0x2d,...,0") and LEN to its size in bytes (without that 0).
function(embed_file_bytes file out_bytes out_len)
  file(READ ${file} hex HEX)
  string(LENGTH "${hex}" hexlen)
  math(EXPR len "${hexlen} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  set(${out_bytes} "${bytes}0" PARENT_SCOPE)
  set(${out_len} ${len} PARENT_SCOPE)
endfunction()
