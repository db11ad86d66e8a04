// Reading and writing PyTorch's zip serialization format.
//
// LibTorch 1.13's torch::pickle_load rejects what torch.save writes for state dicts
// (`collections.OrderedDict` with a `_metadata` attribute), so reading uses its own small
// unpickler over the zip container (caffe2's PyTorchStreamReader). Writing emits what torch.save
// emits (pickle_writer.h), which PyTorch 2.6+'s weights-only torch.load accepts.
#include "oml/io/torch_file.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/serialize.h>
#include <torch/torch.h>

#include <cctype>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <unordered_map>
#include <variant>

#include "oml/common/error.h"
#include "oml/common/strings.h"
#include "oml/io/atomic_file.h"
#include "pickle_writer.h"
#include "storage_classes.h"
#include "zip_checksums.h"

namespace oml::io {
namespace {

struct Mark {};
struct Global {
  std::string module, name;
  std::string qualified() const { return module + "." + name; }
};
using Item = std::variant<c10::IValue, Global, Mark>;

c10::ScalarType storage_dtype(const std::string& storage_name, const std::string& file) {
  const auto dtype = detail::storage_dtype(storage_name);
  OML_CHECK(dtype.has_value(), DataError, file, ": tensors stored as torch.", storage_name,
            " are not supported (float, double, half, bfloat16, integer and bool tensors are)");
  return *dtype;
}

// Python's pickler cannot write a value nested deeper than its recursion limit (1000), so no
// torch.save file holds one; c10 frees nested values recursively, and 100,000 nested tuples in
// a 100 KB file would overflow the stack.
constexpr int kMaxNesting = 1000;

class Unpickler {
 public:
  /// Without `read_storages` tensors are empty placeholders: the pickle is only checked.
  Unpickler(caffe2::serialize::PyTorchStreamReader& reader, const ZipChecksums& checksums, const char* data,
            size_t size, std::string file, bool read_storages = true)
      : reader_(reader),
        checksums_(checksums),
        data_(data),
        size_(size),
        file_(std::move(file)),
        read_storages_(read_storages) {}

  c10::IValue run() {
    while (true) {
      const uint8_t op = read<uint8_t>();
      if (op == '.') break;  // STOP
      step(op);
    }
    OML_CHECK(stack_.size() == 1, DataError, file_, ": corrupt pickle (", stack_.size(), " values left)");
    return value(pop());
  }

 private:
  template <class T>
  T read() {
    need(sizeof(T));
    T out;
    std::memcpy(&out, data_ + pos_, sizeof(T));  // pickle integers are little-endian, like x86/ARM
    pos_ += sizeof(T);
    return out;
  }
  void need(size_t n) const {
    // pos_ <= size_ always; `pos_ + n` would wrap for a length near 2^64 (a damaged opcode).
    OML_CHECK(n <= size_ - pos_, DataError, file_, ": truncated pickle data at byte ", pos_);
  }
  std::string read_bytes(size_t n) {
    need(n);
    std::string out(data_ + pos_, n);
    pos_ += n;
    return out;
  }
  std::string read_line() {
    const size_t start = pos_;
    while (pos_ < size_ && data_[pos_] != '\n') ++pos_;
    need(1);
    return std::string(data_ + start, pos_++ - start);
  }

  Item pop() {
    OML_CHECK(!stack_.empty(), DataError, file_, ": corrupt pickle (stack underflow)");
    Item out = std::move(stack_.back());
    stack_.pop_back();
    return out;
  }
  c10::IValue value(const Item& item) const {
    if (const auto* v = std::get_if<c10::IValue>(&item)) return *v;
    if (const auto* g = std::get_if<Global>(&item)) return "<python object " + g->qualified() + ">";
    throw DataError(file_ + ": corrupt pickle (unexpected mark)");
  }
  std::vector<c10::IValue> pop_to_mark() {
    std::vector<c10::IValue> out;
    while (true) {
      Item item = pop();
      if (std::holds_alternative<Mark>(item)) break;
      out.push_back(value(item));
    }
    std::reverse(out.begin(), out.end());
    return out;
  }
  c10::IValue& top() {
    OML_CHECK(!stack_.empty() && std::holds_alternative<c10::IValue>(stack_.back()), DataError, file_,
              ": corrupt pickle (expected a value on the stack)");
    return std::get<c10::IValue>(stack_.back());
  }
  void memo_put(uint32_t index) {
    OML_CHECK(!stack_.empty(), DataError, file_, ": corrupt pickle (memo of empty stack)");
    memo_[index] = stack_.back();
  }
  void memo_get(uint32_t index) {
    const auto found = memo_.find(index);
    OML_CHECK(found != memo_.end(), DataError, file_, ": corrupt pickle (unknown memo ", index, ")");
    stack_.push_back(found->second);
  }
  static c10::impl::GenericDict new_dict() {
    return c10::impl::GenericDict(c10::AnyType::get(), c10::AnyType::get());
  }
  void set_items(c10::IValue& target, const std::vector<c10::IValue>& kv) {
    OML_CHECK(target.isGenericDict() && kv.size() % 2 == 0, DataError, file_,
              ": corrupt pickle (SETITEMS on a non-dict)");
    auto dict = target.toGenericDict();
    for (size_t i = 0; i < kv.size(); i += 2) {
      // What torch.save writes has string or number keys; c10 cannot hash None, lists or dicts.
      const c10::IValue& key = kv[i];
      OML_CHECK(key.isString() || key.isInt() || key.isDouble() || key.isBool(), DataError, file_,
                ": corrupt pickle (a dict key of type ", key.tagKind(), ")");
      nest(target, kv[i + 1], /*filling=*/true);
      dict.insert_or_assign(key, kv[i + 1]);
    }
  }
  void append(c10::IValue& target, const std::vector<c10::IValue>& items) {
    OML_CHECK(target.isList(), DataError, file_, ": corrupt pickle (APPEND to a non-list)");
    auto list = target.toList();
    for (const auto& item : items) {
      nest(target, item, /*filling=*/true);
      list.push_back(item);
    }
  }
  c10::IValue tuple(std::vector<c10::IValue> items) {
    c10::IValue out(c10::ivalue::Tuple::create(std::move(items)));
    for (const auto& item : out.toTupleRef().elements()) nest(out, item, /*filling=*/false);
    return out;
  }

  // Nesting is tracked as each container is built: its height is 1 + its tallest element's.
  // A pickler writes an element whole before it adds it to its container, so heights need no
  // update later — except when a container already inside another is filled further, which
  // only a recursive value does (`a = []; a.append([a])`) and a crafted file could use to nest
  // without bound; that is refused.
  struct Nesting {
    c10::IValue container;  // kept alive, so that its address is not reused by another
    int height = 1;
    bool nested = false;
  };
  static bool is_container(const c10::IValue& v) { return v.isList() || v.isGenericDict() || v.isTuple(); }
  Nesting& nesting(const c10::IValue& container) {
    const auto found = nesting_.find(container.internalToPointer());
    if (found != nesting_.end()) return found->second;
    return nesting_.emplace(container.internalToPointer(), Nesting{container}).first->second;
  }
  void nest(const c10::IValue& container, const c10::IValue& element, bool filling) {
    if (!is_container(element)) return;
    auto& outer = nesting(container);
    OML_CHECK(!(filling && outer.nested), DataError, file_,
              ": unsupported pickle (a list or dict is filled after it was put in another: a "
              "recursive value, which weights never are)");
    auto& inner = nesting(element);
    inner.nested = true;
    outer.height = std::max(outer.height, inner.height + 1);
    OML_CHECK(outer.height <= kMaxNesting, DataError, file_, ": corrupt pickle (values nested more than ",
              kMaxNesting, " deep)");
  }

  void step(uint8_t op) {
    switch (op) {
      case 0x80:
        read<uint8_t>();
        break;  // PROTO
      case 0x95:
        read<uint64_t>();
        break;  // FRAME
      case '(':
        stack_.emplace_back(Mark{});
        break;
      case '}':
        stack_.emplace_back(c10::IValue(new_dict()));
        break;
      case ']':
        stack_.emplace_back(c10::IValue(c10::impl::GenericList(c10::AnyType::get())));
        break;
      case ')':
        stack_.emplace_back(tuple({}));
        break;
      case 'N':
        stack_.emplace_back(c10::IValue());
        break;
      case 0x88:
        stack_.emplace_back(c10::IValue(true));
        break;
      case 0x89:
        stack_.emplace_back(c10::IValue(false));
        break;
      case 'J':
        stack_.emplace_back(c10::IValue(static_cast<int64_t>(read<int32_t>())));
        break;
      case 'K':
        stack_.emplace_back(c10::IValue(static_cast<int64_t>(read<uint8_t>())));
        break;
      case 'M':
        stack_.emplace_back(c10::IValue(static_cast<int64_t>(read<uint16_t>())));
        break;
      case 0x8a:
        stack_.emplace_back(c10::IValue(read_long(read<uint8_t>())));
        break;
      case 0x8b:
        stack_.emplace_back(c10::IValue(read_long(read<uint32_t>())));
        break;
      case 'G': {
        uint64_t bits = read<uint64_t>();
        bits = __builtin_bswap64(bits);  // BINFLOAT is big-endian
        double d;
        std::memcpy(&d, &bits, sizeof d);
        stack_.emplace_back(c10::IValue(d));
        break;
      }
      case 'X':
        stack_.emplace_back(c10::IValue(read_bytes(read<uint32_t>())));
        break;
      case 0x8c:
        stack_.emplace_back(c10::IValue(read_bytes(read<uint8_t>())));
        break;
      case 0x8d:
        stack_.emplace_back(c10::IValue(read_bytes(read<uint64_t>())));
        break;
      case 'B':
        stack_.emplace_back(c10::IValue(read_bytes(read<uint32_t>())));
        break;
      case 'C':
        stack_.emplace_back(c10::IValue(read_bytes(read<uint8_t>())));
        break;
      case 'q':
        memo_put(read<uint8_t>());
        break;
      case 'r':
        memo_put(read<uint32_t>());
        break;
      case 0x94:
        memo_put(static_cast<uint32_t>(memo_.size()));
        break;
      case 'h':
        memo_get(read<uint8_t>());
        break;
      case 'j':
        memo_get(read<uint32_t>());
        break;
      case 'c': {
        std::string module = read_line();
        std::string name = read_line();
        stack_.emplace_back(Global{std::move(module), std::move(name)});
        break;
      }
      case 0x93: {  // STACK_GLOBAL
        const auto name = value(pop());
        const auto module = value(pop());
        OML_CHECK(name.isString() && module.isString(), DataError, file_, ": corrupt pickle (STACK_GLOBAL)");
        stack_.emplace_back(Global{module.toStringRef(), name.toStringRef()});
        break;
      }
      case 't':
        stack_.emplace_back(tuple(pop_to_mark()));
        break;
      case 0x85:
      case 0x86:
      case 0x87: {
        std::vector<c10::IValue> items(op - 0x84);
        for (auto it = items.rbegin(); it != items.rend(); ++it) *it = value(pop());
        stack_.emplace_back(tuple(std::move(items)));
        break;
      }
      case 's': {
        auto v = value(pop());
        auto k = value(pop());
        set_items(top(), {k, v});
        break;
      }
      case 'u': {
        auto kv = pop_to_mark();
        set_items(top(), kv);
        break;
      }
      case 'a': {
        auto v = value(pop());
        append(top(), {v});
        break;
      }
      case 'e': {
        auto items = pop_to_mark();
        append(top(), items);
        break;
      }
      case 'Q':
        stack_.emplace_back(persistent_load(value(pop())));
        break;
      case 'R': {
        auto args = value(pop());
        Item callable = pop();
        stack_.emplace_back(reduce(callable, args));
        break;
      }
      case 0x81: {  // NEWOBJ: cls.__new__(cls, *args) — only placeholders are produced
        pop();
        Item cls = pop();
        stack_.emplace_back(value(cls));
        break;
      }
      case 'b':  // BUILD: object state (OrderedDict._metadata, objects' __dict__) is not needed
        pop();
        break;
      default:
        throw DataError(file_ + ": unsupported pickle opcode 0x" + to_hex(op) + " at byte " +
                        std::to_string(pos_ - 1));
    }
  }

  static std::string to_hex(uint8_t op) {
    const char* digits = "0123456789abcdef";
    return std::string{digits[op >> 4], digits[op & 15]};
  }

  int64_t read_long(size_t n) {
    OML_CHECK(n <= 8, DataError, file_, ": integer of ", n, " bytes does not fit in 64 bits");
    const std::string bytes = read_bytes(n);
    if (n == 0) return 0;
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[i])) << (8 * i);
    if (n < 8 && (static_cast<uint8_t>(bytes[n - 1]) & 0x80)) v |= ~uint64_t{0} << (8 * n);  // sign-extend
    return static_cast<int64_t>(v);
  }

  // ('storage', storage_type, key, location, numel) -> a 1-D tensor owning the storage's bytes.
  c10::IValue persistent_load(const c10::IValue& pid) {
    OML_CHECK(pid.isTuple(), DataError, file_, ": unsupported persistent id");
    const auto& e = pid.toTupleRef().elements();
    OML_CHECK(e.size() >= 5 && e[0].isString() && e[0].toStringRef() == "storage" && e[2].isString(),
              DataError, file_, ": unsupported persistent id (expected a tensor storage)");
    const std::string key = e[2].toStringRef();
    const auto cached = storages_.find(key);
    if (cached != storages_.end()) return cached->second;
    OML_CHECK(e[1].isString(), DataError, file_, ": unsupported storage type");
    const std::string type = e[1].toStringRef();  // "<python object torch.FloatStorage>"
    const auto dot = type.rfind('.');
    const std::string storage_name = type.substr(dot + 1, type.size() - dot - 2);
    const auto dtype = storage_dtype(storage_name, file_);
    if (!read_storages_) return torch::empty({0}, torch::TensorOptions().dtype(dtype));
    const std::string record = "data/" + key;
    OML_CHECK(reader_.hasRecord(record), DataError, file_, ": missing tensor data record '", record, "'");
    // The record must hold the storage's declared elements, as torch.load checks — and before it
    // is read, since the reader allocates what the zip directory declares: a small file whose
    // compressed record inflates to gigabytes would otherwise be read whole.
    const auto elem = static_cast<uint64_t>(c10::elementSize(dtype));
    OML_CHECK(e[4].isInt() && e[4].toInt() >= 0, DataError, file_, ": corrupt storage of record '", record,
              "' (its size is not a count of elements)");
    const auto numel = static_cast<uint64_t>(e[4].toInt());
    uint64_t expected = 0;
    const uint64_t declared = checksums_.size(record);
    OML_CHECK(!__builtin_mul_overflow(numel, elem, &expected) && declared == expected, DataError, file_,
              ": tensor data record '", record, "' holds ", declared, " bytes, but its storage is ", numel,
              " ", storage_name, " elements (", elem, " bytes each)");
    at::DataPtr ptr;
    size_t bytes = 0;
    std::tie(ptr, bytes) = reader_.getRecord(record);
    checksums_.verify(record, ptr.get(), bytes);
    OML_CHECK(bytes == expected, DataError, file_, ": tensor data record '", record, "' read as ", bytes,
              " bytes, not the ", expected, " its zip directory declares");
    auto storage = torch::empty({static_cast<int64_t>(numel)}, torch::TensorOptions().dtype(dtype));
    if (bytes > 0) std::memcpy(storage.data_ptr(), ptr.get(), bytes);
    storages_.emplace(key, storage);
    return storage;
  }

  c10::IValue reduce(const Item& callable, const c10::IValue& args) {
    const auto* g = std::get_if<Global>(&callable);
    if (!g) return value(callable);
    const std::string name = g->qualified();
    const auto arg = [&](size_t i) -> c10::IValue {
      OML_CHECK(args.isTuple() && args.toTupleRef().elements().size() > i, DataError, file_, ": ", name,
                " called with too few arguments");
      return args.toTupleRef().elements()[i];
    };
    if (name == "collections.OrderedDict") return new_dict();
    if (name == "torch._utils._rebuild_tensor_v2" || name == "torch._utils._rebuild_tensor") {
      return rebuild_tensor(arg(0), arg(1), arg(2), arg(3));
    }
    if (name == "torch._utils._rebuild_parameter" || name == "torch.jit._pickle.restore_type_tag" ||
        name.rfind("torch.jit._pickle.build_", 0) == 0) {
      return arg(0);
    }
    if (name == "_codecs.encode") return arg(0);  // bytes written by protocol 2
    return "<python object " + name + ">";
  }

  std::vector<int64_t> int_list(const c10::IValue& v, const char* what) const {
    OML_CHECK(v.isTuple(), DataError, file_, ": corrupt tensor ", what);
    std::vector<int64_t> out;
    for (const auto& e : v.toTupleRef().elements()) {
      OML_CHECK(e.isInt(), DataError, file_, ": corrupt tensor ", what);
      out.push_back(e.toInt());
    }
    return out;
  }

  c10::IValue rebuild_tensor(const c10::IValue& storage, const c10::IValue& offset, const c10::IValue& size,
                             const c10::IValue& stride) {
    OML_CHECK(storage.isTensor() && offset.isInt(), DataError, file_, ": corrupt tensor record");
    const auto sizes = int_list(size, "size");
    const auto strides = int_list(stride, "stride");
    OML_CHECK(sizes.size() == strides.size(), DataError, file_, ": corrupt tensor record (", sizes.size(),
              " sizes but ", strides.size(), " strides)");
    OML_CHECK(offset.toInt() >= 0, DataError, file_, ": corrupt tensor record (storage offset ",
              offset.toInt(), ")");
    const auto& base = storage.toTensor();
    if (!read_storages_) return base;
    // The view's last element must lie inside the storage. Sizes and strides of a damaged file
    // can be anything: every product and sum is checked for overflow.
    int64_t last = offset.toInt();
    bool empty = false;
    for (size_t i = 0; i < sizes.size(); ++i) {
      OML_CHECK(sizes[i] >= 0 && strides[i] >= 0, DataError, file_, ": corrupt tensor record (size ",
                sizes[i], ", stride ", strides[i], ")");
      int64_t span = 0;
      if (sizes[i] == 0) {
        empty = true;
      } else if (__builtin_mul_overflow(sizes[i] - 1, strides[i], &span) ||
                 __builtin_add_overflow(last, span, &last)) {
        last = std::numeric_limits<int64_t>::max();
      }
    }
    OML_CHECK(empty || last < base.numel(), DataError, file_, ": tensor view exceeds its storage");
    return base.as_strided(sizes, strides, offset.toInt());
  }

  caffe2::serialize::PyTorchStreamReader& reader_;
  const ZipChecksums& checksums_;
  const char* data_;
  size_t size_;
  size_t pos_ = 0;
  std::string file_;
  bool read_storages_;
  std::vector<Item> stack_;
  std::map<uint32_t, Item> memo_;
  std::map<std::string, c10::IValue> storages_;
  std::unordered_map<const void*, Nesting> nesting_;
};

bool is_zip(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  return in.gcount() == 4 && magic[0] == 'P' && magic[1] == 'K' && magic[2] == 3 && magic[3] == 4;
}

}  // namespace

c10::IValue read_torch_file(const std::filesystem::path& path) {
  const std::string file = path.string();
  OML_CHECK(std::filesystem::is_regular_file(path), DataError, file, ": no such file");
  OML_CHECK(is_zip(path), DataError, file,
            ": not a PyTorch zip file (files written with torch.save(..., "
            "_use_new_zipfile_serialization=False) or by torch < 1.6 are not supported: re-save them with "
            "torch.save in a current PyTorch)");
  try {
    const ZipChecksums checksums(path);  // before the reader, which reads a record (its version)
    caffe2::serialize::PyTorchStreamReader reader(file);
    OML_CHECK(reader.hasRecord("data.pkl"), DataError, file, ": no data.pkl record (a TorchScript archive?)");
    at::DataPtr ptr;
    size_t size = 0;
    std::tie(ptr, size) = reader.getRecord("data.pkl");
    checksums.verify("data.pkl", ptr.get(), size);
    Unpickler unpickler(reader, checksums, static_cast<const char*>(ptr.get()), size, file);
    return unpickler.run();
  } catch (const c10::Error& e) {
    throw DataError(file + ": cannot read the zip container: " + e.what_without_backtrace());
  }
}

namespace {

// The TorchScript code of an archive LibTorch's OutputArchive wrote (an optimizer's state) is
// class declarations: attributes with their types, `__annotations__["key"] = Type` and lists of
// names. LibTorch compiles it on load, reading each operator's operand, each bracket's contents
// and each block by recursion, so crafted code nested deep enough overflows the stack. Outside
// string literals and comments this code has no operators at all, brackets a few levels deep and
// one level of blocks: anything beyond that is not an archive LibTorch wrote, and is refused
// before it is parsed.
void check_archive_code(const std::string& where, const char* text, size_t size) {
  constexpr int kMaxBrackets = 16;
  constexpr std::size_t kMaxIndent = 16;
  int brackets = 0;
  int64_t line = 1;
  std::size_t indent = 0;
  bool line_start = true;
  const auto refuse = [&](const std::string& what) {
    throw DataError(where + ": line " + std::to_string(line) + ": " + what +
                    ", which TorchScript code of a saved state never holds (a damaged or crafted archive)");
  };
  for (size_t i = 0; i < size; ++i) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      indent = 0;
      line_start = true;
      continue;
    }
    if (line_start && (c == ' ' || c == '\t')) {
      if (++indent > kMaxIndent) refuse("indentation deeper than " + std::to_string(kMaxIndent) + " columns");
      continue;
    }
    line_start = false;
    if (c == '#') {  // a comment, to the end of the line
      while (i + 1 < size && text[i + 1] != '\n') ++i;
    } else if (c == '"' || c == '\'') {  // a string literal on one line; its contents are data
      size_t end = i + 1;
      while (end < size && text[end] != c && text[end] != '\n') end += text[end] == '\\' ? 2 : 1;
      if (end >= size || text[end] != c) refuse("an unterminated string");
      i = end;
    } else if (c == '[' || c == '(') {
      if (++brackets > kMaxBrackets) refuse("brackets nested deeper than " + std::to_string(kMaxBrackets));
    } else if (c == ']' || c == ')') {
      if (--brackets < 0) refuse("an unmatched '" + std::string(1, c) + "'");
    } else if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ' ' || c == '\t' ||
                 c == '\r' || c == ',' || c == '.' || c == ':' || c == '=')) {
      refuse("the character '" + std::string(1, c) + "'");
    }
  }
}

}  // namespace

void check_torch_archive(const std::string& name, const char* data, size_t size) {
  const ZipChecksums checksums(name, data, size);
  try {
    std::istringstream in(std::string(data, size));
    caffe2::serialize::PyTorchStreamReader reader(&in);
    for (const auto& record : reader.getAllRecords()) {
      at::DataPtr ptr;
      size_t length = 0;
      std::tie(ptr, length) = reader.getRecord(record);
      checksums.verify(record, ptr.get(), length);
      if (ends_with(record, ".pkl") || ends_with(record, "_pkl")) {
        Unpickler(reader, checksums, static_cast<const char*>(ptr.get()), length, name + " (" + record + ")",
                  /*read_storages=*/false)
            .run();
      } else if (ends_with(record, ".py")) {
        check_archive_code(name + " (" + record + ")", static_cast<const char*>(ptr.get()), length);
      }
    }
  } catch (const c10::Error& e) {
    throw DataError(name + ": cannot read the zip container: " + e.what_without_backtrace());
  }
}

std::string torch_file_bytes(const c10::IValue& value) {
  try {
    return detail::pickle_to_zip(value);
  } catch (const InternalError& e) {
    throw InternalError(std::string("cannot serialise: ") + e.what());
  } catch (const c10::Error& e) {
    throw InternalError(std::string("cannot serialise: ") + e.what_without_backtrace());
  }
}

void write_torch_file(const std::filesystem::path& path, const c10::IValue& value) {
  std::string bytes;
  try {
    bytes = torch_file_bytes(value);
  } catch (const InternalError& e) {
    throw InternalError(path.string() + ": " + e.what());
  }
  write_file_atomic(path, bytes);
}

void save_tensor(const std::filesystem::path& path, const at::Tensor& tensor) {
  write_torch_file(path, tensor.detach().cpu().contiguous());
}

at::Tensor load_tensor(const std::filesystem::path& path) {
  const auto value = read_torch_file(path);
  OML_CHECK(value.isTensor(), DataError, path.string(), ": expected a file holding one tensor, found a ",
            value.tagKind());
  return value.toTensor();
}

}  // namespace oml::io
