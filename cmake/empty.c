/* empty.c: keeps a library valid while its folder has no sources yet. */
typedef int hn_empty_translation_unit;
