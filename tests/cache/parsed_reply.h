// ParsedReply: a hiredis reply built from RESP text, as hiredis would hand it to a callback,
// for the Redis client tests that check how replies are read (standalone and cluster).
//
// Thread-safety: none; a test's local value.
#pragma once

#include <hiredis/hiredis.h>

#include <string>

namespace tailcut::testing {

struct ParsedReply {
  explicit ParsedReply(const std::string& resp) {
    redisReader* reader = redisReaderCreate();
    redisReaderFeed(reader, resp.data(), resp.size());
    void* out = nullptr;
    if (redisReaderGetReply(reader, &out) == REDIS_OK) reply = static_cast<redisReply*>(out);
    redisReaderFree(reader);
  }
  ~ParsedReply() {
    if (reply != nullptr) freeReplyObject(reply);
  }
  ParsedReply(const ParsedReply&) = delete;
  ParsedReply& operator=(const ParsedReply&) = delete;

  redisReply* reply = nullptr;  // Null when the text is not one whole reply.
};

}  // namespace tailcut::testing
