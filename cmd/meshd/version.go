package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Set by the build (make build, make image) with
// -ldflags "-X main.version=... -X main.commit=...".
var (
	version string
	commit  string
)

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the build information",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := cmd.OutOrStdout()
			info, ok := debug.ReadBuildInfo()
			fmt.Fprintf(w, "meshd %s\n", buildVersion())
			if !ok {
				if commit != "" {
					fmt.Fprintf(w, "  commit:   %s\n", commit)
				}
				return nil
			}
			fmt.Fprintf(w, "  module:   %s\n", info.Main.Path)
			if rev := buildCommit(info); rev != "" {
				fmt.Fprintf(w, "  commit:   %s\n", rev)
			}
			if t := buildSetting(info, "vcs.time"); t != "" {
				fmt.Fprintf(w, "  built:    %s\n", t)
			}
			fmt.Fprintf(w, "  go:       %s\n", info.GoVersion)
			fmt.Fprintf(w, "  platform: %s/%s\n", runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}

// buildVersion is the version stamped by the build, else the module version
// meshd was built as: a release tag when installed with
// "go install ...@version", "(devel)" for a plain local build.
func buildVersion() string {
	if version != "" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok || info.Main.Version == "" {
		return "(devel)"
	}
	return info.Main.Version
}

// buildCommit is the commit stamped by the build, else the one the go
// command recorded, marked when the tree had changes.
func buildCommit(info *debug.BuildInfo) string {
	if commit != "" {
		return commit
	}
	rev := buildSetting(info, "vcs.revision")
	if rev != "" && buildSetting(info, "vcs.modified") == "true" {
		rev += " (modified)"
	}
	return rev
}

func buildSetting(info *debug.BuildInfo, key string) string {
	for _, s := range info.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}
