// Ask ragsvc a question from Node: streams the answer, then prints its sources and the health status.
// Usage: node ask.js ["How is the confidence score computed?"] [host:port]
// The address defaults to RAG_GRPC_ADDRESS, else 127.0.0.1:50051 (as for the Python CLI); RAG_API_TOKEN, when
// set, is sent as the bearer token (for a server with RAG_AUTH_ENABLED).
const path = require("node:path");
const grpc = require("@grpc/grpc-js");
const protoLoader = require("@grpc/proto-loader");

const protos = path.resolve(__dirname, "../../../protos");
const options = { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true, includeDirs: [protos] };
const ragsvc = grpc.loadPackageDefinition(
  protoLoader.loadSync(["ragsvc/v1/rag_service.proto"], options),
).ragsvc.v1;
// grpc.health.v1.Health/Check, declared here: the .proto files of this repository hold only ragsvc's contract.
const health = grpc.loadPackageDefinition(
  protoLoader.fromJSON(
    {
      nested: {
        grpc: { nested: { health: { nested: { v1: { nested: {
          HealthCheckRequest: { fields: { service: { type: "string", id: 1 } } },
          HealthCheckResponse: {
            fields: { status: { type: "ServingStatus", id: 1 } },
            nested: { ServingStatus: { values: { UNKNOWN: 0, SERVING: 1, NOT_SERVING: 2, SERVICE_UNKNOWN: 3 } } },
          },
          Health: { methods: { Check: { requestType: "HealthCheckRequest", responseType: "HealthCheckResponse" } } },
        } } } } } },
      },
    },
    options,
  ),
).grpc.health.v1;

const [query = "How is the confidence score computed?", address = process.env.RAG_GRPC_ADDRESS || "127.0.0.1:50051"] =
  process.argv.slice(2);
const credentials = grpc.credentials.createInsecure();
const metadata = new grpc.Metadata();
if (process.env.RAG_API_TOKEN) metadata.set("authorization", `Bearer ${process.env.RAG_API_TOKEN}`);
const deadline = () => new Date(Date.now() + 30_000);

function fail(error) {
  // A status without ragsvc's details is the transport's: nothing answered at that address.
  const unreachable = error.code === grpc.status.UNAVAILABLE && !error.metadata?.get("grpc-status-details-bin").length;
  console.error(
    unreachable
      ? `error: cannot reach ragsvc at ${address} (is \`make serve\` running?)\n  ${error.details}`
      : `error: ${grpc.status[error.code]}: ${error.details}`,
  );
  process.exitCode = 1;
}

function checkHealth() {
  const client = new health.Health(address, credentials);
  const service = "ragsvc.v1.RagService";
  client.Check({ service }, { deadline: deadline() }, (error, response) => {
    if (error) return fail(error);
    console.log(`health ${service}: ${response.status}`);
    client.close();
  });
}

const client = new ragsvc.RagService(address, credentials);
const stream = client.AskStream({ query }, metadata, { deadline: deadline() });
stream.on("data", (message) => {
  if (message.event === "text_delta") process.stdout.write(message.text_delta);
  if (message.event === "answer") {
    const answer = message.answer;
    console.log(`\n\n${answer.grounded ? "grounded" : answer.refusal_reason}, ${answer.action}`);
    for (const c of answer.citations) {
      const where = [c.document_name, c.page_number ? `page ${c.page_number}` : "", c.section ? `section '${c.section}'` : ""];
      console.log(`  [#${c.marker}] ${where.filter(Boolean).join(", ")}`);
    }
  }
});
stream.on("error", fail);
stream.on("status", (status) => {
  client.close();
  if (status.code === grpc.status.OK) checkHealth();
});
