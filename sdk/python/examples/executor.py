"""An executor serving bash and a custom tool, each session in its own
directory under ./work. Run with REINS_URL and REINS_ENVIRONMENT_KEY set:
    PYTHONPATH=src python3 examples/executor.py"""
import asyncio, os, signal

from reins_executor import ExecutorClient, bash_tool

async def main() -> None:
    client = ExecutorClient(os.environ["REINS_URL"], environment_key=os.environ["REINS_ENVIRONMENT_KEY"], workspace="./work",
                            tools={"bash": bash_tool(), "word_count": lambda input, ctx: str(len(input["text"].split()))},
                            on_event=lambda e: print(e.type, e.tool or ""))
    asyncio.get_running_loop().add_signal_handler(signal.SIGINT, client.stop)
    try:
        await client.run()
    except Exception as e:
        print(e)

asyncio.run(main())
