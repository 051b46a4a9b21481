package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/spf13/cobra"

	ma "github.com/reinsdev/reins/managedagents"
)

func newDeploymentsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "deployments",
		Aliases: []string{"deployment"},
		Short:   "Manage deployments: an agent run on a schedule or on demand",
		Long: `A deployment binds an agent (pinned to a version) to an environment and the
messages each run's new session starts with, optionally on a cron schedule.
See docs/deployments.md.`,
	}
	cf := addClientFlags(cmd)
	cmd.AddCommand(deploymentsList(cf), deploymentsCreate(cf), deploymentsGet(cf), deploymentsPause(cf),
		deploymentsUnpause(cf), deploymentsRun(cf), deploymentsArchive(cf), deploymentsRuns(cf))
	return cmd
}

func deploymentsList(cf *clientFlags) *cobra.Command {
	var lf listFlags
	var status string
	cmd := &cobra.Command{
		Use:   "list [--status active|paused] [--include-archived]",
		Short: "List deployments (newest first)",
		Args:  cobra.NoArgs,
		RunE: cf.withClient(func(cmd *cobra.Command, _ []string, c *apiClient) error {
			p := anthropic.BetaDeploymentListParams{Status: anthropic.BetaManagedAgentsDeploymentStatus(status)}
			p.Limit, p.Page, p.IncludeArchived = lf.opts()
			page, err := c.Beta.Deployments.List(cmd.Context(), p)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if c.output == outputJSON {
				return printJSON(w, page)
			}
			ds, err := decodeRaw[ma.Page[ma.Deployment]](page)
			if err != nil {
				return err
			}
			t := newTable(w, "ID", "NAME", "STATUS", "AGENT", "SCHEDULE", "NEXT RUN")
			for _, d := range ds.Data {
				t.row(d.ID, d.Name, deploymentStatus(&d), fmt.Sprintf("%s v%d", d.Agent.ID, d.Agent.Version), orDash(schedule(&d)), orDash(nextRun(&d)))
			}
			if err := t.flush(); err != nil {
				return err
			}
			nextPageHint(cmd.ErrOrStderr(), deref(ds.NextPage))
			return nil
		}),
	}
	lf.register(cmd, true)
	cmd.Flags().StringVar(&status, "status", "", "only deployments in this status: active or paused")
	return cmd
}

func deploymentsCreate(cf *clientFlags) *cobra.Command {
	var agent, env, name, cron, tz, desc string
	var messages []string
	cmd := &cobra.Command{
		Use:     "create --agent AGENT_ID --environment ENV_ID --name NAME --message TEXT [--cron EXPR --timezone TZ]",
		Short:   "Create a deployment",
		Example: `  reins deployments create --agent agent_01… --environment env_01… --name nightly --message "Summarize today's issues" --cron "0 22 * * 1-5" --timezone Europe/Paris`,
		Args:    cobra.NoArgs,
		RunE: cf.withClient(func(cmd *cobra.Command, _ []string, c *apiClient) error {
			p := anthropic.BetaDeploymentNewParams{Agent: anthropic.BetaDeploymentNewParamsAgentUnion{OfString: anthropic.String(agent)},
				EnvironmentID: env, Name: name}
			for _, m := range messages {
				p.InitialEvents = append(p.InitialEvents, anthropic.BetaManagedAgentsDeploymentInitialEventParamsUnion{
					OfUserMessage: &anthropic.BetaManagedAgentsUserMessageEventParams{Content: []anthropic.BetaManagedAgentsUserMessageEventParamsContentUnion{
						{OfText: &anthropic.BetaManagedAgentsTextBlockParam{Text: m}}}}})
			}
			if desc != "" {
				p.Description = anthropic.String(desc)
			}
			if cron != "" {
				p.Schedule = anthropic.BetaManagedAgentsScheduleParams{Expression: cron, Timezone: tz}
			}
			d, err := c.Beta.Deployments.New(cmd.Context(), p)
			if err != nil {
				return err
			}
			return printDeployment(cmd.OutOrStdout(), c.output, d)
		}),
	}
	f := cmd.Flags()
	f.StringVar(&agent, "agent", "", "the agent (its latest version is pinned)")
	f.StringVar(&env, "environment", "", "the environment of its sessions")
	f.StringVar(&name, "name", "", "the deployment's name")
	f.StringArrayVar(&messages, "message", nil, "a user message each run's session starts with (repeatable)")
	f.StringVar(&cron, "cron", "", "a 5-field cron expression (minute hour day-of-month month day-of-week)")
	f.StringVar(&tz, "timezone", "UTC", "the IANA time zone the cron expression is read in")
	f.StringVar(&desc, "description", "", "a description")
	return cmd
}

func deploymentsGet(cf *clientFlags) *cobra.Command {
	return byID(cf, "get DEPLOYMENT_ID", "Show a deployment", func(ctx context.Context, c *apiClient, id string) (*anthropic.BetaManagedAgentsDeployment, error) {
		return c.Beta.Deployments.Get(ctx, id, anthropic.BetaDeploymentGetParams{})
	}, printDeployment)
}

func deploymentsPause(cf *clientFlags) *cobra.Command {
	return byID(cf, "pause DEPLOYMENT_ID", "Pause a deployment's schedule (run still works)", func(ctx context.Context, c *apiClient, id string) (*anthropic.BetaManagedAgentsDeployment, error) {
		return c.Beta.Deployments.Pause(ctx, id, anthropic.BetaDeploymentPauseParams{})
	}, printDeployment)
}

func deploymentsUnpause(cf *clientFlags) *cobra.Command {
	return byID(cf, "unpause DEPLOYMENT_ID", "Resume a deployment's schedule (missed instants are not fired)", func(ctx context.Context, c *apiClient, id string) (*anthropic.BetaManagedAgentsDeployment, error) {
		return c.Beta.Deployments.Unpause(ctx, id, anthropic.BetaDeploymentUnpauseParams{})
	}, printDeployment)
}

func deploymentsArchive(cf *clientFlags) *cobra.Command {
	return byID(cf, "archive DEPLOYMENT_ID", "Archive a deployment (it never runs again)", func(ctx context.Context, c *apiClient, id string) (*anthropic.BetaManagedAgentsDeployment, error) {
		return c.Beta.Deployments.Archive(ctx, id, anthropic.BetaDeploymentArchiveParams{})
	}, printDeployment)
}

func deploymentsRun(cf *clientFlags) *cobra.Command {
	return byID(cf, "run DEPLOYMENT_ID", "Run a deployment now (also while paused)", func(ctx context.Context, c *apiClient, id string) (*anthropic.BetaManagedAgentsDeploymentRun, error) {
		return c.Beta.Deployments.Run(ctx, id, anthropic.BetaDeploymentRunParams{})
	}, printRun)
}

func deploymentsRuns(cf *clientFlags) *cobra.Command {
	var lf listFlags
	cmd := &cobra.Command{
		Use:   "runs DEPLOYMENT_ID",
		Short: "List a deployment's runs (newest first)",
		Args:  cobra.ExactArgs(1),
		RunE: cf.withClient(func(cmd *cobra.Command, args []string, c *apiClient) error {
			p := anthropic.BetaDeploymentRunListParams{DeploymentID: anthropic.String(args[0])}
			p.Limit, p.Page, _ = lf.opts()
			page, err := c.Beta.DeploymentRuns.List(cmd.Context(), p)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if c.output == outputJSON {
				return printJSON(w, page)
			}
			runs, err := decodeRaw[ma.Page[ma.DeploymentRun]](page)
			if err != nil {
				return err
			}
			t := newTable(w, "ID", "TRIGGER", "SCHEDULED AT", "SESSION", "ERROR", "CREATED")
			for _, r := range runs.Data {
				t.row(r.ID, r.TriggerContext.Type, orDash(deref(r.TriggerContext.ScheduledAt)), orDash(deref(r.SessionID)), orDash(runError(&r)), r.CreatedAt)
			}
			if err := t.flush(); err != nil {
				return err
			}
			nextPageHint(cmd.ErrOrStderr(), deref(runs.NextPage))
			return nil
		}),
	}
	lf.register(cmd, false)
	return cmd
}

func printDeployment(w io.Writer, output string, v rawJSONer) error {
	if output == outputJSON {
		return printJSON(w, v)
	}
	d, err := decodeRaw[ma.Deployment](v)
	if err != nil {
		return err
	}
	var upcoming []string
	if d.Schedule != nil {
		upcoming = d.Schedule.UpcomingRunsAt
	}
	var paused string
	if d.PausedReason != nil {
		paused = d.PausedReason.Type
		if d.PausedReason.Error != nil {
			paused += ": " + d.PausedReason.Error.Type
		}
	}
	return fields(w,
		"id", d.ID,
		"name", d.Name,
		"status", deploymentStatus(&d),
		"paused reason", paused,
		"agent", fmt.Sprintf("%s v%d", d.Agent.ID, d.Agent.Version),
		"environment", d.EnvironmentID,
		"schedule", schedule(&d),
		"upcoming runs", strings.Join(upcoming, ", "),
		"created", d.CreatedAt,
	)
}

func printRun(w io.Writer, output string, v rawJSONer) error {
	if output == outputJSON {
		return printJSON(w, v)
	}
	r, err := decodeRaw[ma.DeploymentRun](v)
	if err != nil {
		return err
	}
	return fields(w, "id", r.ID, "deployment", r.DeploymentID, "trigger", r.TriggerContext.Type,
		"session", deref(r.SessionID), "error", runError(&r), "created", r.CreatedAt)
}

// deploymentStatus is a deployment's status, marked when archived.
func deploymentStatus(d *ma.Deployment) string {
	if d.ArchivedAt != nil {
		return "archived"
	}
	return d.Status
}

// schedule is a deployment's schedule, "" for manual runs only.
func schedule(d *ma.Deployment) string {
	if d.Schedule == nil {
		return ""
	}
	return d.Schedule.Expression + " (" + d.Schedule.Timezone + ")"
}

// nextRun is a deployment's next scheduled instant, if any.
func nextRun(d *ma.Deployment) string {
	if d.Schedule == nil || len(d.Schedule.UpcomingRunsAt) == 0 {
		return ""
	}
	return d.Schedule.UpcomingRunsAt[0]
}

// runError is a run's error, "" without one.
func runError(r *ma.DeploymentRun) string {
	if r.Error == nil {
		return ""
	}
	return r.Error.Type + ": " + r.Error.Message
}
