"""An executor serving bash (the SDK's) and read (its own), each session in
its own directory under ./work and every call in a bubblewrap sandbox (no
network, none of this process's environment, the session's directory at
/workspace). reins sends executors the built-in toolset's names only: bash,
read, write, edit, glob, grep. Run with REINS_URL and REINS_ENVIRONMENT_KEY
set:
    PYTHONPATH=src python3 examples/executor.py
bash_tool() raises SandboxUnavailableError when bwrap cannot start here;
bash_tool(unconfined=True) runs commands on this host instead."""
import asyncio, os, signal

from reins_executor import ExecutorClient, ToolContext, bash_tool, run_command


async def read(input: dict, ctx: ToolContext):
    # A handler runs in this process: it reads through the sandbox rather
    # than opening a path the model chose.
    return await run_command(["cat", "-n", "--", str(input.get("file_path"))], ctx)


async def main() -> None:
    client = ExecutorClient(os.environ["REINS_URL"], environment_key=os.environ["REINS_ENVIRONMENT_KEY"], workspace="./work",
                            tools={"bash": bash_tool(), "read": read},
                            on_event=lambda e: print(e.type, e.tool or ""))
    asyncio.get_running_loop().add_signal_handler(signal.SIGINT, client.stop)
    try:
        await client.run()
    except Exception as e:
        print(e)

asyncio.run(main())
