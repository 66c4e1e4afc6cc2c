// Command ragsvc-ask is a small Go client of ragsvc, built on the stubs in generated/go.
//
// It checks grpc.health.v1, asks a question with AskStream (printing the text deltas as they arrive, then
// the final answer's citations), asks it again with the unary Ask, and finally sends an invalid request (an
// empty query) to show how the google.rpc details of an error status are decoded: ErrorInfo, BadRequest
// field violations, RetryInfo and QuotaFailure. Any failed call is printed the same way, and exits 1.
//
// Like the Python CLI, it calls RAG_GRPC_ADDRESS (default 127.0.0.1:50051) and sends RAG_API_TOKEN, when
// set, as a bearer token.
//
//	ragsvc-ask ["a question"]
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	ragsvcv1 "example.com/ragsvc/generated/go/ragsvc/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

const defaultQuery = "What happens on SIGTERM?"

func main() {
	address := envOr("RAG_GRPC_ADDRESS", "127.0.0.1:50051")
	query := defaultQuery
	if len(os.Args) > 1 {
		query = strings.Join(os.Args[1:], " ")
	}
	if err := run(address, query); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(address, query string) error {
	dialCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Plaintext, as the Python CLI; for a server with RAG_TLS_* use grpc.WithTransportCredentials.
	conn, err := grpc.DialContext(dialCtx, address, grpc.WithInsecure(), grpc.WithBlock(), grpc.FailOnNonTempDialError(true))
	if err != nil {
		return fmt.Errorf("cannot reach ragsvc at %s (is `make serve` running?): %w", address, err)
	}
	defer conn.Close()

	ctx, cancel := context.WithTimeout(withToken(context.Background()), 60*time.Second)
	defer cancel()

	if err := checkHealth(ctx, healthpb.NewHealthClient(conn)); err != nil {
		return err
	}
	rag := ragsvcv1.NewRagServiceClient(conn)
	if err := askStream(ctx, rag, query); err != nil {
		return err
	}
	if err := ask(ctx, rag, query); err != nil {
		return err
	}
	return askInvalid(ctx, rag)
}

// withToken adds RAG_API_TOKEN, when set, as the bearer token of every call made with the context.
func withToken(ctx context.Context) context.Context {
	if token := os.Getenv("RAG_API_TOKEN"); token != "" {
		return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	return ctx
}

// checkHealth asks grpc.health.v1 about the whole server ("") and about RagService.
func checkHealth(ctx context.Context, health healthpb.HealthClient) error {
	fmt.Println("== grpc.health.v1.Health/Check")
	for _, service := range []string{"", "ragsvc.v1.RagService"} {
		response, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		if err != nil {
			return describe("health check", err)
		}
		fmt.Printf("%q: %s\n", service, response.GetStatus())
	}
	return nil
}

func ask(ctx context.Context, rag ragsvcv1.RagServiceClient, query string) error {
	fmt.Printf("\n== RagService/Ask: %s\n", query)
	response, err := rag.Ask(ctx, &ragsvcv1.AskRequest{Query: query})
	if err != nil {
		return describe("Ask", err)
	}
	answer := response.GetAnswer()
	fmt.Println(answer.GetText())
	printSummary(answer)
	return nil
}

func askStream(ctx context.Context, rag ragsvcv1.RagServiceClient, query string) error {
	fmt.Printf("\n== RagService/AskStream: %s\n", query)
	stream, err := rag.AskStream(ctx, &ragsvcv1.AskStreamRequest{Query: query})
	if err != nil {
		return describe("AskStream", err)
	}
	deltas, citations := 0, 0
	var final *ragsvcv1.Answer
	for {
		message, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return describe("AskStream", err)
		}
		switch event := message.GetEvent().(type) {
		case *ragsvcv1.AskStreamResponse_TextDelta:
			deltas++
			fmt.Print(event.TextDelta) // rendered as it arrives
		case *ragsvcv1.AskStreamResponse_Citation:
			citations++ // its marker completed; the final answer lists it again
		case *ragsvcv1.AskStreamResponse_Answer:
			final = event.Answer
		}
	}
	fmt.Printf("\n(%s, %s)\n", plural(deltas, "text delta"), plural(citations, "citation event"))
	if final == nil {
		return errors.New("AskStream ended without its final answer")
	}
	// The final answer is authoritative: its text and citations replace what the deltas assembled.
	printSummary(final)
	return nil
}

// askInvalid sends an empty query: the server answers INVALID_ARGUMENT with a BadRequest field violation.
func askInvalid(ctx context.Context, rag ragsvcv1.RagServiceClient) error {
	fmt.Println("\n== RagService/Ask with an empty query")
	_, err := rag.Ask(ctx, &ragsvcv1.AskRequest{Query: ""})
	if err == nil {
		return errors.New("an empty query was accepted")
	}
	printStatus(err)
	if status.Code(err) != codes.InvalidArgument {
		return fmt.Errorf("expected INVALID_ARGUMENT, got %s", status.Code(err))
	}
	return nil
}

func printSummary(answer *ragsvcv1.Answer) {
	verdict := "grounded"
	if !answer.GetGrounded() {
		verdict = "not grounded: " + answer.GetRefusalReason().String()
	}
	cache := ""
	if answer.GetFlags().GetCacheHit() {
		cache = " (from the answer cache)"
	}
	fmt.Printf("%s; confidence %.0f; %s; model %s%s\n",
		verdict, answer.GetConfidence().GetOverall(), answer.GetAction(), answer.GetModel(), cache)
	if len(answer.GetCitations()) > 0 {
		fmt.Println("Sources:")
	}
	for _, c := range answer.GetCitations() {
		where := c.GetDocumentName()
		if c.PageNumber != nil {
			where += fmt.Sprintf(", page %d", c.GetPageNumber())
		}
		if c.Section != nil {
			where += fmt.Sprintf(", section '%s'", c.GetSection())
		}
		fmt.Printf("  [#%d] %s (%s, relevance %.2f)\n", c.GetMarker(), where, c.GetSourceId(), c.GetRelevanceScore())
	}
}

// describe turns a failed call into an error that carries its code, message and decoded details.
func describe(call string, err error) error {
	printStatus(err)
	return fmt.Errorf("%s failed: %s", call, codeName(status.Code(err)))
}

// printStatus prints a gRPC status and the google.rpc details the server attached to it.
func printStatus(err error) {
	s := status.Convert(err)
	fmt.Printf("status: %s: %s\n", codeName(s.Code()), s.Message())
	for _, detail := range s.Details() {
		switch d := detail.(type) {
		case *errdetails.ErrorInfo:
			fmt.Printf("  ErrorInfo: reason=%s domain=%s", d.GetReason(), d.GetDomain())
			keys := make([]string, 0, len(d.GetMetadata()))
			for key := range d.GetMetadata() {
				keys = append(keys, key)
			}
			sort.Strings(keys)
			for _, key := range keys {
				fmt.Printf(" %s=%q", key, d.GetMetadata()[key])
			}
			fmt.Println()
		case *errdetails.BadRequest:
			for _, v := range d.GetFieldViolations() {
				fmt.Printf("  BadRequest: field %q: %s\n", v.GetField(), v.GetDescription())
			}
		case *errdetails.RetryInfo:
			fmt.Printf("  RetryInfo: retry after %s\n", d.GetRetryDelay().AsDuration())
		case *errdetails.QuotaFailure:
			for _, v := range d.GetViolations() {
				fmt.Printf("  QuotaFailure: %s: %s\n", v.GetSubject(), v.GetDescription())
			}
		case error:
			fmt.Printf("  (a detail that could not be decoded: %v)\n", d)
		default:
			fmt.Printf("  %T: %v\n", d, d)
		}
	}
}

// codeName spells a code as the other clients do (INVALID_ARGUMENT, not InvalidArgument).
func codeName(code codes.Code) string {
	if code == codes.OK {
		return "OK"
	}
	var name strings.Builder
	for i, r := range code.String() {
		if i > 0 && r >= 'A' && r <= 'Z' {
			name.WriteByte('_')
		}
		name.WriteRune(r)
	}
	return strings.ToUpper(name.String())
}

func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func envOr(name, fallback string) string {
	if value := os.Getenv(name); value != "" {
		return value
	}
	return fallback
}
