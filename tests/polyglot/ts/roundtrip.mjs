// The TypeScript stubs on the wire (tests/polyglot/test_stubs_and_contract.py): prints an AskRequest made with
// them, base64, then decodes the Answer given as base64 in argv[2] and prints some of its fields as JSON.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { Action, AnswerSchema, AskRequestSchema } from "./rag_service_pb.js";

const request = create(AskRequestSchema, {
  query: "Wie hoch ist das Reisebudget? ✓",
  tenantId: "acme",
  userTags: ["finance"],
  retrieval: { topK: 3 },
  followUpCount: 0,
});
console.log(Buffer.from(toBinary(AskRequestSchema, request)).toString("base64"));

const answer = fromBinary(AnswerSchema, Buffer.from(process.argv[2], "base64"));
console.log(JSON.stringify({
  text: answer.text,
  action: Action[answer.action],
  grounded: answer.grounded,
  citations: answer.citations.map((c) => ({ marker: c.marker, sourceId: c.sourceId, page: c.pageNumber ?? null })),
  overall: answer.confidence?.overall,
  totalSeconds: Number(answer.timings?.total?.seconds ?? 0n),
}));
