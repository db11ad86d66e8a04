#include "pickle_writer.h"

#include <caffe2/serialize/inline_container.h>

#include <cstring>
#include <limits>
#include <map>
#include <vector>

#include "oml/common/error.h"
#include "storage_classes.h"

namespace oml::io::detail {
namespace {

// The storage class of a tensor's dtype (storage_classes.h).
std::string storage_class_name(c10::ScalarType dtype) {
  const auto name = detail::storage_class(dtype);
  if (!name) throw InternalError(std::string("cannot save a tensor of dtype ") + c10::toString(dtype));
  return std::string(*name);
}

class PickleWriter {
 public:
  /// The pickle program; tensors' bytes go to storages() in the order of their keys.
  std::string run(const c10::IValue& value) {
    out_ += "\x80\x02";  // PROTO 2, as torch.save
    write(value);
    out_ += '.';  // STOP
    return out_;
  }
  const std::vector<at::Tensor>& storages() const { return storages_; }

 private:
  void write(const c10::IValue& v) {
    if (v.isNone()) {
      out_ += 'N';
    } else if (v.isBool()) {
      out_ += v.toBool() ? '\x88' : '\x89';  // NEWTRUE / NEWFALSE
    } else if (v.isInt()) {
      integer(v.toInt());
    } else if (v.isDouble()) {
      real(v.toDouble());
    } else if (v.isString()) {
      string(v.toStringRef());
    } else if (v.isTensor()) {
      tensor(v.toTensor());
    } else if (v.isTuple()) {
      const auto& items = v.toTupleRef().elements();
      out_ += '(';  // MARK
      for (const auto& item : items) write(item);
      out_ += 't';  // TUPLE
    } else if (v.isList()) {
      out_ += ']';  // EMPTY_LIST
      const auto items = v.toListRef();
      if (items.empty()) return;
      out_ += '(';
      for (const auto& item : items) write(item);
      out_ += 'e';  // APPENDS
    } else if (v.isGenericDict()) {
      out_ += '}';  // EMPTY_DICT
      const auto dict = v.toGenericDict();
      if (dict.empty()) return;
      out_ += '(';
      for (const auto& kv : dict) {
        const auto& key = kv.key();
        if (!key.isString() && !key.isInt()) {
          throw InternalError(std::string("cannot save a dict key of type ") + key.tagKind());
        }
        write(key);
        write(kv.value());
      }
      out_ += 'u';  // SETITEMS
    } else {
      throw InternalError(std::string("cannot save a value of type ") + v.tagKind());
    }
  }

  void integer(int64_t x) {
    if (x >= 0 && x < 256) {
      out_ += 'K';  // BININT1
      out_ += static_cast<char>(x);
    } else if (x >= std::numeric_limits<int32_t>::min() && x <= std::numeric_limits<int32_t>::max()) {
      out_ += 'J';  // BININT: 4 bytes, little-endian, signed
      little_endian(static_cast<uint64_t>(x), 4);
    } else {
      out_ += '\x8a';  // LONG1: 8 bytes of two's complement (always enough for an int64)
      out_ += '\x08';
      little_endian(static_cast<uint64_t>(x), 8);
    }
  }

  void real(double x) {
    out_ += 'G';  // BINFLOAT: big-endian IEEE double
    uint64_t bits = 0;
    std::memcpy(&bits, &x, sizeof bits);
    for (int shift = 56; shift >= 0; shift -= 8) out_ += static_cast<char>((bits >> shift) & 0xff);
  }

  void string(const std::string& text) {
    out_ += 'X';  // BINUNICODE: 4-byte little-endian length, UTF-8
    little_endian(text.size(), 4);
    out_ += text;
  }

  void global(const char* module, const char* name) {
    out_ += 'c';
    out_ += module;
    out_ += '\n';
    out_ += name;
    out_ += '\n';
  }

  void int_tuple(c10::IntArrayRef values) {
    out_ += '(';
    for (const int64_t x : values) integer(x);
    out_ += 't';
  }

  // torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks), the
  // storage as the persistent id ('storage', torch.<Type>Storage, key, 'cpu', numel).
  void tensor(const at::Tensor& t) {
    const at::Tensor data = t.detach().cpu().contiguous();
    const std::string key = std::to_string(storages_.size());
    storages_.push_back(data);
    global("torch._utils", "_rebuild_tensor_v2");
    out_ += '(';
    out_ += '(';
    string("storage");
    global("torch", storage_class_name(data.scalar_type()).c_str());
    string(key);
    string("cpu");
    integer(data.numel());
    out_ += 't';
    out_ += 'Q';  // BINPERSID
    integer(0);
    int_tuple(data.sizes());
    int_tuple(data.strides());
    out_ += '\x89';  // requires_grad=False: torch.save of a state dict stores detached tensors
    global("collections", "OrderedDict");
    out_ += ')';  // the empty backward-hooks dict: OrderedDict()
    out_ += 'R';
    out_ += 't';
    out_ += 'R';  // REDUCE
  }

  void little_endian(uint64_t x, int bytes) {
    for (int i = 0; i < bytes; ++i) out_ += static_cast<char>((x >> (8 * i)) & 0xff);
  }

  std::string out_;
  std::vector<at::Tensor> storages_;
};

}  // namespace

std::string pickle_to_zip(const c10::IValue& value) {
  PickleWriter pickler;
  const std::string program = pickler.run(value);
  std::string zip;
  caffe2::serialize::PyTorchStreamWriter writer([&zip](const void* data, size_t size) -> size_t {
    zip.append(static_cast<const char*>(data), size);
    return size;
  });
  writer.writeRecord("data.pkl", program.data(), program.size());
  writer.writeRecord("byteorder", "little", 6);  // as torch.save since 2.1; x86 and ARM
  const auto& storages = pickler.storages();
  for (size_t i = 0; i < storages.size(); ++i) {
    const at::Tensor& t = storages[i];
    writer.writeRecord("data/" + std::to_string(i), t.data_ptr(), t.numel() * t.element_size());
  }
  writer.writeEndOfFile();
  return zip;
}

}  // namespace oml::io::detail
