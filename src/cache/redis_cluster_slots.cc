#include "cache/redis_cluster_slots.h"

#include <hiredis/hiredis.h>

#include <array>
#include <charconv>

namespace tailcut {
namespace {

constexpr std::array<uint16_t, 256> MakeCrc16Table() {
  std::array<uint16_t, 256> table{};
  for (int i = 0; i < 256; ++i) {
    uint16_t crc = static_cast<uint16_t>(i << 8);
    for (int bit = 0; bit < 8; ++bit) {
      crc = static_cast<uint16_t>((crc & 0x8000) != 0 ? (crc << 1) ^ 0x1021 : crc << 1);
    }
    table[static_cast<size_t>(i)] = crc;
  }
  return table;
}
constexpr std::array<uint16_t, 256> kCrc16Table = MakeCrc16Table();

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool ParseInt(std::string_view s, int* out) {
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

std::string_view Text(const redisReply* r) {
  return {r->str, static_cast<size_t>(r->len)};
}

// One node entry of a CLUSTER SLOTS row: [host, port, id, (metadata map)...].
bool ParseNode(const redisReply* r, const RedisNodeAddress& answered_by, RedisNodeAddress* out) {
  if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
      r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_INTEGER) {
    return false;
  }
  const std::string_view host = Text(r->element[0]);
  out->host = host.empty() || host == "?" ? answered_by.host : std::string(host);
  if (r->element[1]->integer <= 0 || r->element[1]->integer > 65535) return false;
  out->port = static_cast<int>(r->element[1]->integer);
  return true;
}

}  // namespace

uint16_t RedisCrc16(std::string_view data) {
  uint16_t crc = 0;
  for (unsigned char c : data) {
    crc = static_cast<uint16_t>((crc << 8) ^ kCrc16Table[((crc >> 8) ^ c) & 0xff]);
  }
  return crc;
}

std::string_view RedisHashTag(std::string_view key) {
  const size_t open = key.find('{');
  if (open == std::string_view::npos) return key;
  const size_t close = key.find('}', open + 1);
  if (close == std::string_view::npos || close == open + 1) return key;
  return key.substr(open + 1, close - open - 1);
}

int RedisKeySlot(std::string_view key) {
  return RedisCrc16(RedisHashTag(key)) & (kRedisClusterSlots - 1);
}

std::string RedisNodeAddress::ToString() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Result<RedisNodeAddress> ParseRedisNodeAddress(std::string_view text) {
  const std::string_view t = Trim(text);
  auto bad = [&](std::string_view why) {
    return Status::InvalidArgument("redis node address '" + std::string(t) +
                                   "': " + std::string(why) + " (expected host:port)");
  };
  RedisNodeAddress a;
  std::string_view port;
  if (!t.empty() && t.front() == '[') {
    const size_t close = t.find(']');
    if (close == std::string_view::npos || close + 1 >= t.size() || t[close + 1] != ':') {
      return bad("bad IPv6 literal");
    }
    a.host = std::string(t.substr(1, close - 1));
    port = t.substr(close + 2);
  } else {
    const size_t colon = t.rfind(':');
    if (colon == std::string_view::npos) return bad("no port");
    a.host = std::string(t.substr(0, colon));
    port = t.substr(colon + 1);
    if (a.host.find(':') != std::string::npos) return bad("an IPv6 literal needs brackets");
  }
  if (a.host.empty()) return bad("no host");
  if (!ParseInt(port, &a.port) || a.port < 1 || a.port > 65535) {
    return bad("port must be 1..65535");
  }
  return a;
}

Result<std::vector<RedisNodeAddress>> ParseRedisNodeList(std::string_view list) {
  std::vector<RedisNodeAddress> out;
  while (true) {
    const size_t comma = list.find(',');
    const std::string_view entry = Trim(list.substr(0, comma));
    if (entry.empty()) {
      return Status::InvalidArgument("redis node list '" + std::string(list) +
                                     "': empty entry (expected host:port,host:port)");
    }
    Result<RedisNodeAddress> a = ParseRedisNodeAddress(entry);
    if (!a.ok()) return a.status();
    out.push_back(std::move(a).value());
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return out;
}

Result<std::vector<RedisSlotRange>> ParseClusterSlots(const redisReply* reply,
                                                      const RedisNodeAddress& answered_by) {
  const Status bad = Status::Internal("redis CLUSTER SLOTS: unexpected reply");
  if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY) return bad;
  std::vector<RedisSlotRange> out;
  out.reserve(reply->elements);
  for (size_t i = 0; i < reply->elements; ++i) {
    const redisReply* row = reply->element[i];
    if (row->type != REDIS_REPLY_ARRAY || row->elements < 3 ||
        row->element[0]->type != REDIS_REPLY_INTEGER ||
        row->element[1]->type != REDIS_REPLY_INTEGER) {
      return bad;
    }
    RedisSlotRange range;
    const long long first = row->element[0]->integer;
    const long long last = row->element[1]->integer;
    if (first < 0 || last < first || last >= kRedisClusterSlots) return bad;
    range.first = static_cast<int>(first);
    range.last = static_cast<int>(last);
    if (!ParseNode(row->element[2], answered_by, &range.master)) return bad;
    for (size_t j = 3; j < row->elements; ++j) {
      RedisNodeAddress replica;
      if (!ParseNode(row->element[j], answered_by, &replica)) return bad;
      range.replicas.push_back(std::move(replica));
    }
    out.push_back(std::move(range));
  }
  return out;
}

std::optional<RedisRedirect> ParseRedisRedirect(std::string_view error,
                                                const RedisNodeAddress& answered_by) {
  RedisRedirect r;
  if (error.starts_with("MOVED ")) {
    r.kind = RedisRedirect::Kind::kMoved;
    error.remove_prefix(6);
  } else if (error.starts_with("ASK ")) {
    r.kind = RedisRedirect::Kind::kAsk;
    error.remove_prefix(4);
  } else {
    return std::nullopt;
  }
  const size_t space = error.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  if (!ParseInt(error.substr(0, space), &r.slot) || r.slot < 0 || r.slot >= kRedisClusterSlots) {
    return std::nullopt;
  }
  const std::string_view where = error.substr(space + 1);
  if (where.starts_with(':')) {
    r.target.host = answered_by.host;
    if (!ParseInt(where.substr(1), &r.target.port) || r.target.port < 1 || r.target.port > 65535) {
      return std::nullopt;
    }
    return r;
  }
  Result<RedisNodeAddress> target = ParseRedisNodeAddress(where);
  if (!target.ok()) return std::nullopt;
  r.target = std::move(target).value();
  return r;
}

}  // namespace tailcut
