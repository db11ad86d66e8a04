#include "mat_file.h"

#include <zlib.h>

#include <cstring>
#include <optional>

#include "../../common/raw_io.h"
#include "oml/common/error.h"

namespace oml::data::convert {

namespace {

// Data types (miXXX) and array classes (mxXXX) of the MAT-file format.
enum MiType : uint32_t {
  miINT8 = 1,
  miUINT8 = 2,
  miINT16 = 3,
  miUINT16 = 4,
  miINT32 = 5,
  miUINT32 = 6,
  miSINGLE = 7,
  miDOUBLE = 9,
  miINT64 = 12,
  miUINT64 = 13,
  miMATRIX = 14,
  miCOMPRESSED = 15,
  miUTF8 = 16,
};
enum MxClass : uint32_t { mxCELL = 1, mxSTRUCT = 2, mxOBJECT = 3, mxCHAR = 4, mxSPARSE = 5 };

struct Element {
  uint32_t type = 0;
  std::string_view data;
};

class Reader {
 public:
  Reader(std::string_view bytes, const std::string& file) : bytes_(bytes), file_(file) {}

  bool done() const { return pos_ >= bytes_.size(); }

  Element next() {
    need(8);
    uint32_t type = u32(pos_), size = u32(pos_ + 4);
    Element element;
    if (type >> 16) {  // small data element: size in the upper half, data in the tag's last 4 bytes
      element.type = type & 0xFFFF;
      size = type >> 16;
      OML_CHECK(size <= 4, DataError, file_, ": corrupt MAT file (small element of ", size, " bytes)");
      element.data = bytes_.substr(pos_ + 4, size);
      pos_ += 8;
      return element;
    }
    pos_ += 8;
    need(size);
    element.type = type;
    element.data = bytes_.substr(pos_, size);
    pos_ += size;
    if (type != miCOMPRESSED) pos_ = std::min(bytes_.size(), (pos_ + 7) / 8 * 8);
    return element;
  }

 private:
  void need(std::size_t n) const {
    OML_CHECK(pos_ + n <= bytes_.size(), DataError, file_, ": the MAT file is truncated (needed ", n,
              " bytes at offset ", pos_, ")");
  }
  uint32_t u32(std::size_t at) const {
    uint32_t value;
    std::memcpy(&value, bytes_.data() + at, 4);
    return value;
  }

  std::string_view bytes_;
  std::size_t pos_ = 0;
  const std::string& file_;
};

template <class T>
void append_as_double(std::string_view data, std::vector<double>& out) {
  const std::size_t n = data.size() / sizeof(T);
  for (std::size_t i = 0; i < n; ++i) {
    T value;
    std::memcpy(&value, data.data() + i * sizeof(T), sizeof(T));
    out.push_back(static_cast<double>(value));
  }
}

std::vector<double> numbers_of(const Element& element, const std::string& file) {
  std::vector<double> out;
  switch (element.type) {
    case miINT8:
      append_as_double<int8_t>(element.data, out);
      break;
    case miUINT8:
      append_as_double<uint8_t>(element.data, out);
      break;
    case miINT16:
      append_as_double<int16_t>(element.data, out);
      break;
    case miUINT16:
      append_as_double<uint16_t>(element.data, out);
      break;
    case miINT32:
      append_as_double<int32_t>(element.data, out);
      break;
    case miUINT32:
      append_as_double<uint32_t>(element.data, out);
      break;
    case miSINGLE:
      append_as_double<float>(element.data, out);
      break;
    case miDOUBLE:
      append_as_double<double>(element.data, out);
      break;
    case miINT64:
      append_as_double<int64_t>(element.data, out);
      break;
    case miUINT64:
      append_as_double<uint64_t>(element.data, out);
      break;
    default:
      throw DataError(file + ": unsupported MAT data type " + std::to_string(element.type));
  }
  return out;
}

std::string inflate(std::string_view compressed, const std::string& file) {
  z_stream stream{};
  OML_CHECK(inflateInit(&stream) == Z_OK, RuntimeError, "zlib inflateInit failed");
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  stream.avail_in = static_cast<uInt>(compressed.size());
  std::string out;
  char buffer[1 << 16];
  int code;
  do {
    stream.next_out = reinterpret_cast<Bytef*>(buffer);
    stream.avail_out = sizeof(buffer);
    code = ::inflate(&stream, Z_NO_FLUSH);
    out.append(buffer, sizeof(buffer) - stream.avail_out);
  } while (code == Z_OK);
  inflateEnd(&stream);
  OML_CHECK(code == Z_STREAM_END, DataError, file,
            ": a compressed MAT variable cannot be decompressed (zlib code ", code, ")");
  return out;
}

MatValue parse_matrix(std::string_view content, const std::string& file, std::string* name) {
  MatValue value;
  if (content.empty()) return value;  // an empty [] field
  Reader reader(content, file);
  const Element flags = reader.next();
  OML_CHECK(flags.data.size() >= 4, DataError, file, ": corrupt MAT array flags");
  uint32_t flag_word;
  std::memcpy(&flag_word, flags.data.data(), 4);
  const uint32_t cls = flag_word & 0xFF;
  for (double d : numbers_of(reader.next(), file)) value.dims.push_back(static_cast<int64_t>(d));
  const Element name_element = reader.next();
  if (name) *name = std::string(name_element.data);

  if (cls == mxSTRUCT) {
    value.kind = MatValue::Kind::structure;
    const auto name_length = static_cast<std::size_t>(numbers_of(reader.next(), file).at(0));
    const Element names = reader.next();
    OML_CHECK(name_length > 0 && names.data.size() % name_length == 0, DataError, file,
              ": corrupt MAT field names");
    for (std::size_t i = 0; i < names.data.size(); i += name_length) {
      const std::string_view raw = names.data.substr(i, name_length);
      value.field_names.emplace_back(raw.substr(0, raw.find('\0')));
    }
    const int64_t total = value.count() * static_cast<int64_t>(value.field_names.size());
    for (int64_t i = 0; i < total; ++i) {
      const Element field = reader.next();
      OML_CHECK(field.type == miMATRIX, DataError, file, ": corrupt MAT struct field");
      value.elements.push_back(parse_matrix(field.data, file, nullptr));
    }
  } else if (cls == mxCELL) {
    value.kind = MatValue::Kind::cell;
    for (int64_t i = 0; i < value.count(); ++i) {
      const Element cell = reader.next();
      OML_CHECK(cell.type == miMATRIX, DataError, file, ": corrupt MAT cell");
      value.elements.push_back(parse_matrix(cell.data, file, nullptr));
    }
  } else if (cls == mxCHAR) {
    value.kind = MatValue::Kind::text;
    const Element chars = reader.next();
    if (chars.type == miUTF8 || chars.type == miUINT8 || chars.type == miINT8) {
      value.text = std::string(chars.data);
    } else {
      for (double c : numbers_of(chars, file)) value.text += static_cast<char>(static_cast<unsigned char>(c));
    }
  } else if (cls >= 6 && cls <= 15) {  // mxDOUBLE .. mxUINT64
    value.kind = MatValue::Kind::numeric;
    value.numbers = numbers_of(reader.next(), file);
  } else {
    throw DataError(file + ": MAT array class " + std::to_string(cls) +
                    (cls == mxSPARSE   ? " (sparse)"
                     : cls == mxOBJECT ? " (object)"
                                       : "") +
                    " is not supported");
  }
  return value;
}

}  // namespace

int64_t MatValue::count() const {
  int64_t n = dims.empty() ? 0 : 1;
  for (int64_t d : dims) n *= d;
  return n;
}

const MatValue& MatValue::field(int64_t i, const std::string& name, const std::string& file) const {
  OML_CHECK(kind == Kind::structure, DataError, file, ": expected a struct array with field '", name, "'");
  for (std::size_t f = 0; f < field_names.size(); ++f) {
    if (field_names[f] == name) return elements.at(i * field_names.size() + f);
  }
  std::string known;
  for (const auto& field : field_names) known += (known.empty() ? "" : ", ") + field;
  throw DataError(file + ": the struct has no field '" + name + "' (fields: " + known + ")");
}

double MatValue::scalar(const std::string& what) const {
  OML_CHECK(kind == Kind::numeric && numbers.size() == 1, DataError, what, ": expected one number");
  return numbers[0];
}

std::map<std::string, MatValue> read_mat_file(const std::filesystem::path& path) {
  const std::string file = path.string();
  const std::optional<std::string> read = oml::detail::read_file(file);
  OML_CHECK(read.has_value(), DataError, "cannot open ", file);
  const std::string& bytes = *read;
  OML_CHECK(bytes.size() >= 128, DataError, file, " is too short to be a MAT file");
  OML_CHECK(bytes.compare(0, 10, "MATLAB 5.0") == 0 && bytes[126] == 'I' && bytes[127] == 'M', DataError,
            file,
            " is not a little-endian MATLAB 5 MAT file (MATLAB 7.3 / HDF5 files are not supported: save with "
            "-v7)");
  std::map<std::string, MatValue> variables;
  Reader reader(std::string_view(bytes).substr(128), file);
  while (!reader.done()) {
    Element element = reader.next();
    std::string inflated;
    if (element.type == miCOMPRESSED) {
      inflated = inflate(element.data, file);
      Reader inner(inflated, file);
      element = inner.next();
    }
    if (element.type != miMATRIX) continue;
    std::string name;
    MatValue value = parse_matrix(element.data, file, &name);
    variables.emplace(name, std::move(value));
  }
  return variables;
}

}  // namespace oml::data::convert
