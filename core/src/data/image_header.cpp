// Image sizes from headers, before anything is decoded (image.h: read_image_header).
//
// OpenCV has no public call that reads an image's size without decoding it, and its own limit
// (OPENCV_IO_MAX_IMAGE_PIXELS, 2^30) is read once from the environment and lets a 30000 x 30000
// PNG of 2.6 MB through to a multi-gigabyte allocation. So the formats oml-cpp decodes are the
// ones whose headers are read here, each by its specification, and no other format reaches
// OpenCV (which would also try DICOM, OpenEXR and JPEG 2000 decoders on a client's bytes).
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <limits>
#include <string>

#include "../common/raw_io.h"
#include "header_words.h"
#include "oml/common/strings.h"
#include "oml/data/image.h"

namespace oml::data {

namespace {

using ::oml::detail::big_endian_u32;

uint32_t le16(const std::string& b, std::size_t at) {
  return static_cast<uint32_t>(static_cast<unsigned char>(b[at])) |
         static_cast<uint32_t>(static_cast<unsigned char>(b[at + 1])) << 8;
}
uint32_t le32(const std::string& b, std::size_t at) { return le16(b, at) | le16(b, at + 2) << 16; }
uint64_t le64(const std::string& b, std::size_t at) { return le32(b, at) | uint64_t{le32(b, at + 4)} << 32; }
uint32_t be16(const std::string& b, std::size_t at) {
  return static_cast<uint32_t>(static_cast<unsigned char>(b[at])) << 8 |
         static_cast<uint32_t>(static_cast<unsigned char>(b[at + 1]));
}
unsigned char byte_at(const std::string& b, std::size_t at) { return static_cast<unsigned char>(b[at]); }

[[noreturn]] void damaged(const std::string& path, const std::string& format, const std::string& what) {
  throw DataError("image " + path + " is a damaged " + format + ": " + what);
}

// PNG (ISO/IEC 15948): the signature, then IHDR first: width, height, bit depth, colour type.
ImageHeader png_header(const std::string& b, const std::string& path) {
  if (b.size() < 8 + 8 + 13 || b.compare(12, 4, "IHDR") != 0) damaged(path, "PNG", "no IHDR chunk first");
  ImageHeader h{"PNG", big_endian_u32(b, 16), big_endian_u32(b, 20), 4, byte_at(b, 24) == 16 ? 2 : 1};
  const unsigned char colour = byte_at(b, 25);
  if (colour == 0) h.channels = 1;                 // greyscale
  if (colour == 2 || colour == 3) h.channels = 3;  // RGB, palette (decoded to BGR)
  return h;                                        // 4 and 6 (with alpha): 4
}

// JPEG (ITU T.81): markers from SOI to the first start-of-frame (SOF0..SOF15 but DHT C4, JPG C8
// and DAC CC), whose segment holds precision, height, width and the number of components.
ImageHeader jpeg_header(const std::string& b, const std::string& path) {
  std::size_t at = 2;
  while (at + 4 <= b.size()) {
    if (byte_at(b, at) != 0xFF) damaged(path, "JPEG", "no marker at byte " + std::to_string(at));
    const unsigned char marker = byte_at(b, at + 1);
    if (marker == 0xFF) {  // fill byte before a marker
      ++at;
      continue;
    }
    if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD8)) {  // standalone markers
      at += 2;
      continue;
    }
    if (marker == 0xD9 || marker == 0xDA) break;  // end of image, or a scan before any frame
    const uint32_t length = be16(b, at + 2);
    if (length < 2) damaged(path, "JPEG", "a segment of length " + std::to_string(length));
    const bool frame = marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC;
    if (frame) {
      if (at + 10 > b.size() || length < 8) damaged(path, "JPEG", "its frame header is cut short");
      const int64_t height = be16(b, at + 5), width = be16(b, at + 7);
      if (height == 0) damaged(path, "JPEG", "its height is left to a DNL marker, which is not supported");
      const int64_t components = byte_at(b, at + 9);
      // CMYK / YCCK (4 components) are decoded to BGR.
      return ImageHeader{"JPEG", width, height, components == 1 ? 1 : 3, 1};
    }
    at += 2 + length;
  }
  damaged(path, "JPEG", "no frame header before its first scan");
}

// BMP: "BM", the file header (14 bytes), then a DIB header whose size says which: the OS/2
// BITMAPCOREHEADER (12 bytes: 16-bit width and height) or a BITMAPINFOHEADER and its successors
// (signed 32-bit width and height; a negative height is a top-down image).
ImageHeader bmp_header(const std::string& b, const std::string& path) {
  if (b.size() < 26) damaged(path, "BMP", "its headers are cut short");
  const uint32_t dib = le32(b, 14);
  int64_t width = 0, height = 0;
  uint32_t bits = 24;
  if (dib == 12) {
    width = le16(b, 18);
    height = le16(b, 20);
    if (b.size() >= 26) bits = le16(b, 24);
  } else {
    if (dib < 40 || b.size() < 30)
      damaged(path, "BMP", "an unknown DIB header of " + std::to_string(dib) + " bytes");
    width = static_cast<int32_t>(le32(b, 18));
    height = static_cast<int32_t>(le32(b, 22));
    bits = le16(b, 28);
  }
  if (width < 0) damaged(path, "BMP", "a negative width");
  return ImageHeader{"BMP", width, height < 0 ? -height : height, bits == 32 ? 4 : 3, 1};
}

// WebP (RIFF container): the first chunk is VP8 (lossy: 14-bit sizes after the key frame's
// start code), VP8L (lossless: 14-bit sizes minus one after the 0x2F signature) or VP8X
// (extended: 24-bit canvas sizes minus one).
ImageHeader webp_header(const std::string& b, const std::string& path) {
  if (b.size() < 30) damaged(path, "WebP", "its headers are cut short");
  const std::string chunk = b.substr(12, 4);
  if (chunk == "VP8 ") {
    if (byte_at(b, 23) != 0x9D || byte_at(b, 24) != 0x01 || byte_at(b, 25) != 0x2A)
      damaged(path, "WebP", "no VP8 key frame start code");
    return ImageHeader{"WebP", le16(b, 26) & 0x3FFF, le16(b, 28) & 0x3FFF, 3, 1};
  }
  if (chunk == "VP8L") {
    if (byte_at(b, 20) != 0x2F) damaged(path, "WebP", "no VP8L signature");
    const uint32_t bits = le32(b, 21);
    return ImageHeader{"WebP", (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1, 4, 1};
  }
  if (chunk == "VP8X") {
    const auto u24 = [&](std::size_t at) { return le16(b, at) | uint32_t{byte_at(b, at + 2)} << 16; };
    return ImageHeader{"WebP", int64_t{u24(24)} + 1, int64_t{u24(27)} + 1, 4, 1};
  }
  damaged(path, "WebP", "an unknown first chunk '" + valid_utf8(chunk) + "'");
}

// TIFF (6.0) and BigTIFF: the byte order, the first IFD's offset, and in that IFD the tags
// ImageWidth (256), ImageLength (257), BitsPerSample (258) and SamplesPerPixel (277). OpenCV
// decodes the first page only.
ImageHeader tiff_header(const std::string& b, const std::string& path) {
  const bool little = b[0] == 'I';
  const auto u16 = [&](uint64_t at) { return little ? le16(b, at) : be16(b, at); };
  const auto u32 = [&](uint64_t at) { return little ? le32(b, at) : big_endian_u32(b, at); };
  const auto u64 = [&](uint64_t at) {
    return little ? le64(b, at) : uint64_t{big_endian_u32(b, at)} << 32 | big_endian_u32(b, at + 4);
  };
  const bool big = u16(2) == 43;
  const uint64_t header = big ? 16 : 8;
  if (b.size() < header) damaged(path, "TIFF", "its header is cut short");
  const uint64_t ifd = big ? u64(8) : u32(4);
  const uint64_t count_size = big ? 8 : 2, entry_size = big ? 20 : 12, value_at = big ? 12 : 8;
  if (ifd < header || ifd > b.size() - count_size)
    damaged(path, "TIFF", "its first IFD lies outside the file");
  const uint64_t entries = big ? u64(ifd) : u16(ifd);
  if (entries > (b.size() - ifd - count_size) / entry_size)
    damaged(path, "TIFF", "its first IFD is cut short");
  int64_t width = 0, height = 0, bits = 1, samples = 1;
  for (uint64_t e = 0; e < entries; ++e) {
    const uint64_t at = ifd + count_size + e * entry_size;
    const uint32_t tag = u16(at), type = u16(at + 2);
    // The first value of a SHORT (3) or LONG (4) / LONG8 (16) field, stored in the entry itself
    // (BitsPerSample of an RGB image has three values stored elsewhere; all are equal in the
    // images OpenCV decodes, and a larger one only makes decode_bytes() larger).
    uint64_t value = 0;
    if (type == 3) {
      value = u16(at + value_at);
    } else if (type == 4) {
      value = u32(at + value_at);
    } else if (type == 16 && big) {
      value = u64(at + value_at);
    } else {
      continue;
    }
    const uint64_t values = big ? u64(at + 4) : u32(at + 4);
    const uint64_t value_size = type == 3 ? 2 : type == 4 ? 4 : 8;
    const bool inline_value = values <= (big ? 8 : 4) / value_size;
    if (tag == 258 && !inline_value) {  // BitsPerSample of several samples: the first one
      const uint64_t offset = big ? u64(at + value_at) : u32(at + value_at);
      value = offset < b.size() - 1 ? u16(offset) : 16;
    }
    const auto clamped = static_cast<int64_t>(std::min<uint64_t>(value, uint64_t{1} << 40));
    if (tag == 256) width = clamped;
    if (tag == 257) height = clamped;
    if (tag == 258) bits = clamped;
    if (tag == 277) samples = clamped;
  }
  return ImageHeader{"TIFF", width, height, std::clamp<int64_t>(samples, 1, 4),
                     bits > 16  ? 4
                     : bits > 8 ? 2
                                : 1};
}

// Netpbm (P1..P6: width, height and, but for bitmaps, the largest value, as whitespace-separated
// decimal numbers with '#' comments), PAM (P7: WIDTH/HEIGHT/DEPTH/MAXVAL lines up to ENDHDR) and
// PFM ("PF" colour / "Pf" grey: width, height and a scale; 32-bit float samples).
int64_t header_number(const std::string& word, const std::string& path, const std::string& format,
                      const std::string& what) {
  if (word.empty() || word.size() > 18 || !std::all_of(word.begin(), word.end(), [](char c) {
        return std::isdigit(static_cast<unsigned char>(c));
      }))
    damaged(path, format, "its header's " + what + " is not a number ('" + valid_utf8(word) + "')");
  return std::stoll(word);
}

ImageHeader netpbm_header(const std::string& b, const std::string& path) {
  const char kind = b[1];
  detail::HeaderWords words(b, 2);
  if (kind == 'F' || kind == 'f') {
    const int64_t width = header_number(words.next(), path, "PFM", "width");
    const int64_t height = header_number(words.next(), path, "PFM", "height");
    return ImageHeader{"PFM", width, height, kind == 'F' ? 3 : 1, 4};
  }
  if (kind == '7') {
    int64_t width = -1, height = -1, depth = 3, maxval = 255;
    for (std::string key = words.next(); key != "ENDHDR"; key = words.next()) {
      if (key.empty()) damaged(path, "PAM", "no ENDHDR line");
      if (key == "TUPLTYPE") {
        words.next();
        continue;
      }
      if (key != "WIDTH" && key != "HEIGHT" && key != "DEPTH" && key != "MAXVAL")
        damaged(path, "PAM", "an unknown header line '" + valid_utf8(key) + "'");
      const int64_t value = header_number(words.next(), path, "PAM", key);
      (key == "WIDTH" ? width : key == "HEIGHT" ? height : key == "DEPTH" ? depth : maxval) = value;
    }
    if (width < 0 || height < 0) damaged(path, "PAM", "no WIDTH or HEIGHT");
    return ImageHeader{"PNM", width, height, std::clamp<int64_t>(depth, 1, 4), maxval > 255 ? 2 : 1};
  }
  const int64_t width = header_number(words.next(), path, "PNM", "width");
  const int64_t height = header_number(words.next(), path, "PNM", "height");
  const bool bitmap = kind == '1' || kind == '4';
  const int64_t maxval = bitmap ? 1 : header_number(words.next(), path, "PNM", "largest value");
  const bool colour = kind == '3' || kind == '6';
  return ImageHeader{"PNM", width, height, colour ? 3 : 1, maxval > 255 ? 2 : 1};
}

bool starts(const std::string& b, const char* magic, std::size_t length) {
  return b.size() >= length && b.compare(0, length, magic, length) == 0;
}

int64_t saturating_product(int64_t a, int64_t b) {
  if (a <= 0 || b <= 0) return 0;
  return a > std::numeric_limits<int64_t>::max() / b ? std::numeric_limits<int64_t>::max() : a * b;
}

}  // namespace

int64_t ImageHeader::pixels() const { return saturating_product(width, height); }

int64_t ImageHeader::decode_bytes() const {
  const int64_t deep_copy = bytes_per_sample > 1 ? channels : 0;  // the 8-bit conversion
  return saturating_product(pixels(), channels * bytes_per_sample + deep_copy + 3);
}

ImageHeader read_image_header(const std::string& bytes, const std::string& path) {
  ImageHeader header;
  if (starts(bytes, "\x89PNG\r\n\x1a\n", 8)) {
    header = png_header(bytes, path);
  } else if (starts(bytes, "\xFF\xD8\xFF", 3)) {
    header = jpeg_header(bytes, path);
  } else if (starts(bytes, "BM", 2)) {
    header = bmp_header(bytes, path);
  } else if (starts(bytes, "RIFF", 4) && bytes.size() >= 12 && bytes.compare(8, 4, "WEBP") == 0) {
    header = webp_header(bytes, path);
  } else if (starts(bytes, "II*\0", 4) || starts(bytes, "MM\0*", 4) || starts(bytes, "II+\0", 4) ||
             starts(bytes, "MM\0+", 4)) {
    header = tiff_header(bytes, path);
  } else if (bytes.size() >= 3 && bytes[0] == 'P' &&
             std::string("1234567Ff").find(bytes[1]) != std::string::npos &&
             std::isspace(static_cast<unsigned char>(bytes[2]))) {
    header = netpbm_header(bytes, path);
  } else {
    throw DataError("image " + path +
                    " is not a JPEG, PNG, BMP, WebP, TIFF or PNM/PFM file (the formats oml-cpp decodes; "
                    "it reads their size before decoding them)");
  }
  if (header.width <= 0 || header.height <= 0) {
    damaged(
        path, header.format,
        "its header gives a size of " + std::to_string(header.width) + "x" + std::to_string(header.height));
  }
  return header;
}

}  // namespace oml::data
