package ids

// Prefixes of deployments and their runs.
const (
	Deployment    = "depl_"
	DeploymentRun = "drun_"
)
