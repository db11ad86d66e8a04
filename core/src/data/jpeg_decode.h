#pragma once
// JPEG decoding through libjpeg itself rather than OpenCV's imdecode, which decodes damaged data
// to grey blocks and only prints libjpeg's warning ("Corrupt JPEG data: premature end of data
// segment"): a training image silently half grey. Here those warnings are the caller's error.

#include <opencv2/core.hpp>
#include <string>

namespace oml::data::detail {

/// The most scans a JPEG may have: progressive files have about ten; each scan is a pass over the
/// whole image, so thousands of tiny scans make a small file decode for minutes (libjpeg-turbo's
/// own tools offer the same limit as -maxscans).
inline constexpr int kMaxJpegScans = 500;

/// `bytes` (a JPEG) decoded as OpenCV's imdecode(IMREAD_UNCHANGED) does it: 8-bit BGR, or one
/// channel for a grayscale file; the same libjpeg, options and pixels. DataError naming `path`
/// when libjpeg cannot decode it or reports that pixels are missing or invented (damaged
/// entropy-coded data, a premature end, a lost restart interval), or past kMaxJpegScans. A
/// harmless warning (bytes between the data and a marker, an unknown JFIF version) is not one.
/// CMYK and YCCK files are checked the same way, then decoded by OpenCV (its CMYK conversion).
cv::Mat decode_jpeg(const std::string& bytes, const std::string& path);

}  // namespace oml::data::detail
