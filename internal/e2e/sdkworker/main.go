// Command worker runs the official SDK's EnvironmentWorker, unmodified, for
// the end-to-end tests: worker URL ENVIRONMENT_ID ENVIRONMENT_KEY WORKDIR.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/lib/environments"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

func main() {
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: worker URL ENVIRONMENT_ID ENVIRONMENT_KEY WORKDIR")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	client := anthropic.NewClient(option.WithBaseURL(os.Args[1]), option.WithAPIKey("unused"))
	idle := 2 * time.Second
	w := environments.NewEnvironmentWorker(client, environments.EnvironmentWorkerOptions{
		EnvironmentID:  os.Args[2],
		EnvironmentKey: os.Args[3],
		Workdir:        os.Args[4],
		MaxIdle:        &idle,
	})
	if err := w.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}
