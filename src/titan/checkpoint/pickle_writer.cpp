#include "titan/checkpoint/pickle_writer.h"

#include <cstring>

#include "titan/common/error.h"

namespace titan::checkpoint::pickle {

PickleWriter::PickleWriter() { out_ = "\x80\x02"; }

void PickleWriter::none() { out_ += 'N'; }
void PickleWriter::boolean(bool b) { out_ += b ? '\x88' : '\x89'; }

void PickleWriter::integer(int64_t i) {
  const auto append_le = [&](uint64_t v, int n) {
    for (int k = 0; k < n; ++k) out_ += static_cast<char>((v >> (8 * k)) & 0xff);
  };
  if (i >= 0 && i < 256) {
    out_ += 'K';
    append_le(static_cast<uint64_t>(i), 1);
  } else if (i >= 0 && i < 65536) {
    out_ += 'M';
    append_le(static_cast<uint64_t>(i), 2);
  } else if (i >= INT32_MIN && i <= INT32_MAX) {
    out_ += 'J';
    append_le(static_cast<uint32_t>(static_cast<int32_t>(i)), 4);
  } else {
    out_ += '\x8a';  // LONG1, 8 bytes two's complement
    out_ += '\x08';
    append_le(static_cast<uint64_t>(i), 8);
  }
}

void PickleWriter::real(double d) {
  uint64_t u = 0;
  std::memcpy(&u, &d, 8);
  out_ += 'G';  // big-endian
  for (int k = 7; k >= 0; --k) out_ += static_cast<char>((u >> (8 * k)) & 0xff);
}

void PickleWriter::string(const std::string& utf8) {
  out_ += 'X';
  const uint64_t n = utf8.size();
  for (int k = 0; k < 4; ++k) out_ += static_cast<char>((n >> (8 * k)) & 0xff);
  out_ += utf8;
}

void PickleWriter::bytes(const std::string& raw) {
  // Each byte is the latin-1 character of that code point, in UTF-8.
  std::string text;
  for (const char c : raw) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x80) {
      text += c;
    } else {
      text += static_cast<char>(0xc0 | (u >> 6));
      text += static_cast<char>(0x80 | (u & 0x3f));
    }
  }
  global("_codecs", "encode");
  string(text);
  string("latin1");
  end_tuple(2);
  reduce();
}

void PickleWriter::json(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null:
      return none();
    case nlohmann::json::value_t::boolean:
      return boolean(value.get<bool>());
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
      return integer(value.get<int64_t>());
    case nlohmann::json::value_t::number_float:
      return real(value.get<double>());
    case nlohmann::json::value_t::string:
      return string(value.get<std::string>());
    case nlohmann::json::value_t::array:
      empty_list();
      if (value.empty()) return;
      mark();
      for (const auto& item : value) json(item);
      return appends();
    case nlohmann::json::value_t::object:
      empty_dict();
      if (value.empty()) return;
      mark();
      for (const auto& [key, item] : value.items()) {
        string(key);
        json(item);
      }
      return setitems();
    default:
      fail("cannot pickle the JSON value ", value.dump());
  }
}

void PickleWriter::integer_tuple(const std::vector<int64_t>& values) {
  if (values.size() > 3) mark();
  for (const int64_t v : values) integer(v);
  end_tuple(values.size());
}

void PickleWriter::real_tuple(const std::vector<double>& values) {
  if (values.size() > 3) mark();
  for (const double v : values) real(v);
  end_tuple(values.size());
}

void PickleWriter::global(const std::string& module, const std::string& name) {
  out_ += 'c';
  out_ += module;
  out_ += '\n';
  out_ += name;
  out_ += '\n';
}

void PickleWriter::mark() { out_ += '('; }

void PickleWriter::end_tuple(size_t n) {
  switch (n) {
    case 0:
      out_ += ')';
      break;
    case 1:
      out_ += '\x85';
      break;
    case 2:
      out_ += '\x86';
      break;
    case 3:
      out_ += '\x87';
      break;
    default:
      out_ += 't';
  }
}

void PickleWriter::empty_tuple() { out_ += ')'; }
void PickleWriter::empty_list() { out_ += ']'; }
void PickleWriter::empty_dict() { out_ += '}'; }
void PickleWriter::appends() { out_ += 'e'; }
void PickleWriter::setitems() { out_ += 'u'; }
void PickleWriter::reduce() { out_ += 'R'; }
void PickleWriter::build() { out_ += 'b'; }
void PickleWriter::binpersid() { out_ += 'Q'; }

void PickleWriter::torch_size(const std::vector<int64_t>& values) {
  global("torch", "Size");
  integer_tuple(values);
  end_tuple(1);
  reduce();
}

void PickleWriter::new_object(const std::string& module, const std::string& cls) {
  global(module, cls);
  empty_tuple();
  out_ += '\x81';  // NEWOBJ
}

std::string PickleWriter::finish() {
  out_ += '.';
  return std::move(out_);
}

}  // namespace titan::checkpoint::pickle
