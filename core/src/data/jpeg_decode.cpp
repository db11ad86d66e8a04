#include "jpeg_decode.h"

// jpeglib.h needs size_t and FILE declared first, and jerror.h its configuration (jconfig.h says
// whether arithmetic coding, and so its warning, is built in).
#include <csetjmp>
#include <cstddef>
#include <cstdio>
// clang-format off
#include <jpeglib.h>
#include <jerror.h>
// clang-format on

#include <opencv2/imgcodecs.hpp>

#include "oml/common/error.h"
#include "oml/common/strings.h"

namespace oml::data::detail {

namespace {

// libjpeg reports through these callbacks from C frames: an error (and a warning that means
// damage) jumps back to decode_into with the message kept, never a C++ exception through them.
struct JpegReport {
  jpeg_error_mgr mgr;  // first: libjpeg passes &mgr, cast back to the report
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  int scans;
};

// Warnings after which the image holds pixels the file did not give (libjpeg fills a missing or
// undecodable stretch with the blocks of a flat grey, or skips to the next restart marker).
bool means_damage(int code) {
  switch (code) {
#ifdef D_ARITH_CODING_SUPPORTED
    case JWRN_ARITH_BAD_CODE:
#endif
    case JWRN_BOGUS_PROGRESSION:
    case JWRN_HIT_MARKER:
    case JWRN_HUFF_BAD_CODE:
    case JWRN_JPEG_EOF:
    case JWRN_MUST_RESYNC:
    case JWRN_NOT_SEQUENTIAL:
      return true;
    default:
      return false;
  }
}

[[noreturn]] void on_error(j_common_ptr cinfo) {
  auto* report = reinterpret_cast<JpegReport*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, report->message);
  std::longjmp(report->jump, 1);
}

// Called for every warning (level -1) and trace message (levels >= 1); libjpeg's default prints
// warnings on stderr, which a library must not.
void on_message(j_common_ptr cinfo, int level) {
  auto* report = reinterpret_cast<JpegReport*>(cinfo->err);
  if (level < 0 && means_damage(cinfo->err->msg_code)) {
    (*cinfo->err->format_message)(cinfo, report->message);
    std::longjmp(report->jump, 1);
  }
  if (level > 0 && cinfo->err->msg_code == JTRC_SOS && ++report->scans > kMaxJpegScans) {
    std::snprintf(report->message, sizeof(report->message), "it has more than %d scans", kMaxJpegScans);
    std::longjmp(report->jump, 1);
  }
}

// Decodes into `out` (allocated here, once the header is read); returns "" or what went wrong.
// Only trivially destructible locals between setjmp and the calls that may jump back to it.
std::string decode_into(const std::string& bytes, cv::Mat& out, bool& cmyk) {
  jpeg_decompress_struct cinfo{};
  JpegReport report{};
  cinfo.err = jpeg_std_error(&report.mgr);
  report.mgr.error_exit = on_error;
  report.mgr.emit_message = on_message;
  if (setjmp(report.jump) != 0) {
    jpeg_destroy_decompress(&cinfo);
    return report.message;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, reinterpret_cast<const unsigned char*>(bytes.data()),
               static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&cinfo, TRUE);
  cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
  const int channels = cmyk ? 4 : cinfo.num_components == 1 ? 1 : 3;
  cinfo.out_color_space = cmyk ? JCS_CMYK : channels == 1 ? JCS_GRAYSCALE : JCS_EXT_BGR;
  jpeg_start_decompress(&cinfo);
  out.create(static_cast<int>(cinfo.output_height), static_cast<int>(cinfo.output_width), CV_8UC(channels));
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = out.ptr<JSAMPLE>(static_cast<int>(cinfo.output_scanline));
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return "";
}

}  // namespace

cv::Mat decode_jpeg(const std::string& bytes, const std::string& path) {
  cv::Mat decoded;
  bool cmyk = false;
  const std::string problem = decode_into(bytes, decoded, cmyk);
  OML_CHECK(problem.empty(), DataError, "image ", path, " is a corrupt JPEG: ", problem);
  if (!cmyk) return decoded;
  // Whole, as checked above; OpenCV turns its inks into BGR as it always has here.
  const cv::Mat raw(1, static_cast<int>(bytes.size()), CV_8UC1, const_cast<char*>(bytes.data()));
  return cv::imdecode(raw, cv::IMREAD_UNCHANGED | cv::IMREAD_IGNORE_ORIENTATION);
}

}  // namespace oml::data::detail
