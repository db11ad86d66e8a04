// The one source of target oml_heavy_headers (core/CMakeLists.txt), which exists to own the
// precompiled header that the static libraries reuse (cmake/OmlHelpers.cmake,
// oml_precompile_heavy_headers). Nothing is defined here.
