// The one source of target oml_heavy_headers_pie (core/CMakeLists.txt), which exists to own the
// precompiled header that the executables reuse: they are compiled position-independent as
// executables (-fPIE), and a GCC PCH is valid only for the flags it was made with
// (cmake/OmlHelpers.cmake, oml_precompile_heavy_headers).
int main() { return 0; }
