// Ask ragsvc a question from Node: streams the answer, then prints its sources and the health status.
// Usage: node ask.js "How is the confidence score computed?" [host:port]
const path = require("node:path");
const grpc = require("@grpc/grpc-js");
const protoLoader = require("@grpc/proto-loader");

const protos = path.resolve(__dirname, "../../../protos");
const options = { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true, includeDirs: [protos] };
const ragsvc = grpc.loadPackageDefinition(
  protoLoader.loadSync(["ragsvc/v1/rag_service.proto"], options),
).ragsvc.v1;

const [query = "How is the confidence score computed?", address = "127.0.0.1:50051"] = process.argv.slice(2);
const client = new ragsvc.RagService(address, grpc.credentials.createInsecure());
const deadline = new Date(Date.now() + 30_000);

const stream = client.AskStream({ query }, { deadline });
stream.on("data", (message) => {
  if (message.event === "text_delta") process.stdout.write(message.text_delta);
  if (message.event === "answer") {
    const answer = message.answer;
    console.log(`\n\n${answer.grounded ? "grounded" : answer.refusal_reason}, ${answer.action}`);
    for (const c of answer.citations) console.log(`  [#${c.marker}] ${c.document_name} ${c.section ?? ""}`);
  }
});
stream.on("error", (error) => {
  console.error(`error: ${grpc.status[error.code]}: ${error.details}`);
  process.exitCode = 1;
});
