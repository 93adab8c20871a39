// Tests for the KServe v2 gRPC tensor conversions (src/server/grpc/kserve_grpc_tensors.h):
// typed contents and raw bytes read alike, every check of shape, datatype, range and the
// all-or-none rule for raw_input_contents, and outputs written raw. Plus the gRPC status
// mapping (src/server/grpc/grpc_status.h).
#include "server/grpc/kserve_grpc_tensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "server/grpc/grpc_status.h"

namespace tailcut {
namespace {

using Input = inference::ModelInferRequest::InferInputTensor;

Input MakeInput(const std::string& name, const std::string& datatype, std::vector<int64_t> shape) {
  Input in;
  in.set_name(name);
  in.set_datatype(datatype);
  for (int64_t d : shape) in.add_shape(d);
  return in;
}

template <typename T>
std::string Bytes(std::initializer_list<T> values) {
  std::string out;
  for (T v : values) out.append(reinterpret_cast<const char*>(&v), sizeof v);
  return out;
}

void ExpectInvalid(const Status& s, std::string_view says) {
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.message();
  EXPECT_NE(s.message().find(says), std::string::npos) << s.message();
}

TEST(KServeGrpcTensorsTest, TypedContentsAndRawBytesGiveTheSameTensor) {
  Input typed = MakeInput("ids", "INT64", {2, 2});
  for (int64_t v : {int64_t{-3}, int64_t{0}, int64_t{7}, int64_t{1} << 40}) typed.mutable_contents()->add_int64_contents(v);
  auto a = TensorFromGrpcInput(typed, 0, nullptr);
  ASSERT_TRUE(a.ok()) << a.status().message();
  const std::string raw = Bytes<int64_t>({-3, 0, 7, int64_t{1} << 40});
  auto b = TensorFromGrpcInput(MakeInput("ids", "INT64", {2, 2}), 0, &raw);
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(a->type, DataType::kInt64);
  EXPECT_EQ(a->shape, (Shape{2, 2}));
  EXPECT_EQ(a->data, b->data);
}

TEST(KServeGrpcTensorsTest, NarrowIntegersComeInTheWideFieldsAndAreRangeChecked) {
  Input in8 = MakeInput("x", "INT8", {3});
  for (int v : {-128, 0, 127}) in8.mutable_contents()->add_int_contents(v);
  auto ok = TensorFromGrpcInput(in8, 0, nullptr);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->As<int8_t>()[0], -128);
  EXPECT_EQ(ok->As<int8_t>()[2], 127);
  in8.mutable_contents()->set_int_contents(2, 128);
  ExpectInvalid(TensorFromGrpcInput(in8, 0, nullptr).status(), "128, out of range");

  Input in16 = MakeInput("x", "INT16", {1});
  in16.mutable_contents()->add_int_contents(-40000);
  ExpectInvalid(TensorFromGrpcInput(in16, 0, nullptr).status(), "out of range");

  Input u8 = MakeInput("x", "UINT8", {2});
  u8.mutable_contents()->add_uint_contents(255);
  u8.mutable_contents()->add_uint_contents(256);
  ExpectInvalid(TensorFromGrpcInput(u8, 0, nullptr).status(), "256, out of range");

  Input b = MakeInput("x", "BOOL", {2});
  b.mutable_contents()->add_bool_contents(true);
  b.mutable_contents()->add_bool_contents(false);
  auto bools = TensorFromGrpcInput(b, 0, nullptr);
  ASSERT_TRUE(bools.ok());
  EXPECT_EQ(bools->As<uint8_t>()[0], 1);
  EXPECT_EQ(bools->As<uint8_t>()[1], 0);
}

TEST(KServeGrpcTensorsTest, ElementsMustMatchTheShapeAndTheDatatypesField) {
  Input in = MakeInput("x", "FP32", {2, 2});
  for (float v : {1.f, 2.f, 3.f}) in.mutable_contents()->add_fp32_contents(v);
  ExpectInvalid(TensorFromGrpcInput(in, 0, nullptr).status(),
                "fp32_contents has 3 elements but shape [2, 2] needs 4");
  in.mutable_contents()->add_fp32_contents(4.f);
  EXPECT_TRUE(TensorFromGrpcInput(in, 0, nullptr).ok());
  in.mutable_contents()->add_fp64_contents(5.0);  // A second field set: a client mistake.
  ExpectInvalid(TensorFromGrpcInput(in, 0, nullptr).status(),
                "elements go in fp32_contents, but other contents fields are set");

  Input half = MakeInput("h", "FP16", {1});
  half.mutable_contents()->add_fp32_contents(1.f);
  ExpectInvalid(TensorFromGrpcInput(half, 0, nullptr).status(), "raw_input_contents");
  const std::string two = Bytes<uint16_t>({0x3c00});
  auto h = TensorFromGrpcInput(MakeInput("h", "FP16", {1}), 0, &two);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->As<uint16_t>()[0], 0x3c00);

  const std::string short_raw = Bytes<float>({1.f});
  ExpectInvalid(TensorFromGrpcInput(MakeInput("x", "FP32", {2}), 0, &short_raw).status(),
                "raw_input_contents has 4 bytes but shape [2] of FP32 needs 8");
  ExpectInvalid(TensorFromGrpcInput(MakeInput("x", "FP32", {-1}), 0, &short_raw).status(),
                "non-negative");
  ExpectInvalid(TensorFromGrpcInput(MakeInput("x", "BF16", {1}), 0, &short_raw).status(),
                "datatype 'BF16'");
  ExpectInvalid(TensorFromGrpcInput(MakeInput("", "FP32", {1}), 3, &short_raw).status(),
                "inputs[3].name is required");
  // A shape whose element count overflows is refused before anything is sized from it.
  ExpectInvalid(
      TensorFromGrpcInput(MakeInput("x", "FP32", {1LL << 40, 1LL << 40}), 0, &short_raw).status(),
      "overflows");
  // 2^61 INT64 elements are 2^64 bytes, which wraps to 0 in 64 bits: no raw bytes must not
  // pass for them.
  const std::string empty;
  ExpectInvalid(
      TensorFromGrpcInput(MakeInput("x", "INT64", {int64_t{1} << 61}), 0, &empty).status(),
      "raw_input_contents has 0 bytes");
}

TEST(KServeGrpcTensorsTest, RawInputsAreAllOrNone) {
  inference::ModelInferRequest req;
  *req.add_inputs() = MakeInput("a", "FP32", {1});
  *req.add_inputs() = MakeInput("b", "FP32", {1});
  auto none = GrpcRawInputs(req);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, (std::vector<const std::string*>{nullptr, nullptr}));
  req.add_raw_input_contents(Bytes<float>({1.f}));
  ExpectInvalid(GrpcRawInputs(req).status(), "1 entries but the request has 2 inputs");
  req.add_raw_input_contents(Bytes<float>({2.f}));
  auto both = GrpcRawInputs(req);
  ASSERT_TRUE(both.ok());
  EXPECT_EQ((*both)[1], &req.raw_input_contents(1));
  req.mutable_inputs(1)->mutable_contents()->add_fp32_contents(2.f);
  ExpectInvalid(GrpcRawInputs(req).status(), "input 'b' has both contents and raw_input_contents");
}

TEST(KServeGrpcTensorsTest, TextsComeTypedOrLengthPrefixedAndMatchTheShape) {
  Input typed = MakeInput("text", "BYTES", {2});
  typed.mutable_contents()->add_bytes_contents("hello");
  typed.mutable_contents()->add_bytes_contents(std::string("nul\0byte", 8));
  auto texts = TextsFromGrpcInput(typed, nullptr);
  ASSERT_TRUE(texts.ok()) << texts.status().message();
  EXPECT_EQ(*texts, (std::vector<std::string>{"hello", std::string("nul\0byte", 8)}));

  std::string raw = Bytes<uint32_t>({5}) + "hello" + Bytes<uint32_t>({0});
  auto from_raw = TextsFromGrpcInput(MakeInput("text", "BYTES", {2, 1}), &raw);
  ASSERT_TRUE(from_raw.ok()) << from_raw.status().message();
  EXPECT_EQ(*from_raw, (std::vector<std::string>{"hello", ""}));
  ExpectInvalid(TextsFromGrpcInput(MakeInput("text", "BYTES", {3}), &raw).status(),
                "2 elements but shape [3] needs 3");
  std::string cut = Bytes<uint32_t>({9}) + "hello";
  ExpectInvalid(TextsFromGrpcInput(MakeInput("text", "BYTES", {1}), &cut).status(),
                "element 0 says 9 bytes");
  typed.mutable_contents()->add_int_contents(1);
  ExpectInvalid(TextsFromGrpcInput(typed, nullptr).status(), "bytes_contents");
}

// A BYTES tensor for a tensor model (encoded images): the same reading as texts, kept as
// elements; written back raw as length-prefixed elements (a classification output).
TEST(KServeGrpcTensorsTest, BytesTensorsAreElementsBothWays) {
  Input typed = MakeInput("input", "BYTES", {2, 1});
  typed.mutable_contents()->add_bytes_contents(std::string("\xff\xd8\xff", 3));
  typed.mutable_contents()->add_bytes_contents("");
  auto t = TensorFromGrpcInput(typed, 0, nullptr);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->type, DataType::kBytes);
  EXPECT_EQ(t->shape, (Shape{2, 1}));
  EXPECT_EQ(t->elements, (std::vector<std::string>{std::string("\xff\xd8\xff", 3), ""}));
  EXPECT_TRUE(t->data.empty());
  ExpectInvalid(TensorFromGrpcInput(MakeInput("input", "BYTES", {3}), 0, nullptr).status(),
                "0 elements but shape [3] needs 3");

  inference::ModelInferResponse response;
  Tensor classes;
  classes.name = "logits";
  classes.type = DataType::kBytes;
  classes.shape = {1, 2};
  classes.elements = {"0.900000:1:goldfish", "0.050000:0"};
  ASSERT_TRUE(AddGrpcOutput(classes, &response).ok());
  EXPECT_EQ(response.outputs(0).datatype(), "BYTES");
  EXPECT_EQ(response.raw_output_contents(0),
            Bytes<uint32_t>({19}) + "0.900000:1:goldfish" + Bytes<uint32_t>({10}) + "0.050000:0");
  auto back = TensorFromGrpcInput(MakeInput("logits", "BYTES", {1, 2}), 0,
                                  &response.raw_output_contents(0));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->elements, classes.elements);
}

TEST(KServeGrpcTensorsTest, OutputsGoRawAndNonFiniteOnesAreRefused) {
  Tensor t;
  t.name = "embedding";
  t.type = DataType::kFp32;
  t.shape = {1, 2};
  const float values[] = {0.5f, -1.f};
  t.data.resize(sizeof values);
  std::memcpy(t.data.data(), values, sizeof values);
  inference::ModelInferResponse res;
  ASSERT_TRUE(AddGrpcOutput(t, &res).ok());
  ASSERT_EQ(res.outputs_size(), 1);
  EXPECT_EQ(res.outputs(0).name(), "embedding");
  EXPECT_EQ(res.outputs(0).datatype(), "FP32");
  EXPECT_EQ(res.outputs(0).shape_size(), 2);
  ASSERT_EQ(res.raw_output_contents_size(), 1);
  EXPECT_EQ(res.raw_output_contents(0), std::string(reinterpret_cast<const char*>(values), 8));

  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(t.data.data() + 4, &nan, 4);
  Status s = AddGrpcOutput(t, &res);
  EXPECT_EQ(s.code(), Status::Code::kInternal);
  EXPECT_NE(s.message().find("at element 1"), std::string::npos) << s.message();
  EXPECT_EQ(res.outputs_size(), 1);  // Nothing appended.
  EXPECT_EQ(res.raw_output_contents_size(), 1);
}

TEST(GrpcStatusTest, CodesFollowKServe) {
  EXPECT_TRUE(ToGrpcStatus(Status::Ok()).ok());
  const std::pair<Status, grpc::StatusCode> cases[] = {
      {Status::InvalidArgument("m"), grpc::StatusCode::INVALID_ARGUMENT},
      {Status::NotFound("m"), grpc::StatusCode::NOT_FOUND},
      {Status::PayloadTooLarge("m"), grpc::StatusCode::INVALID_ARGUMENT},
      {Status::ResourceExhausted("m"), grpc::StatusCode::UNAVAILABLE},
      {Status::DeadlineExceeded("m"), grpc::StatusCode::DEADLINE_EXCEEDED},
      {Status::Unavailable("m"), grpc::StatusCode::UNAVAILABLE},
      {Status::FailedPrecondition("m"), grpc::StatusCode::FAILED_PRECONDITION},
      {Status::Unauthenticated("m"), grpc::StatusCode::UNAUTHENTICATED},
      {Status::PermissionDenied("m"), grpc::StatusCode::PERMISSION_DENIED},
      {Status::Internal("m"), grpc::StatusCode::INTERNAL},
      {Status::Cancelled("m"), grpc::StatusCode::CANCELLED},
  };
  for (const auto& [status, code] : cases) {
    const grpc::Status g = ToGrpcStatus(status);
    EXPECT_EQ(g.error_code(), code) << status.ToString();
    EXPECT_EQ(g.error_message(), "m");
  }
}

}  // namespace
}  // namespace tailcut
