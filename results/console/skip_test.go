package console

import (
	"regexp"
	"strings"
	"testing"
)

// skipCases is the skip list's table test: one case per entry of
// skipframes.txt, in its order, with real kernel symbols the entry must
// match. TestSkipListTable fails when an entry has no case here, so a new
// entry cannot land untested.
var skipCases = []struct {
	class skipClass
	expr  string
	match []string
}{
	{skipReport, `dump_stack\w*`, []string{"dump_stack"}},
	{skipReport, `__dump_stack`, []string{"__dump_stack"}},
	{skipReport, `show_stack`, []string{"show_stack"}},
	{skipReport, `show_regs\w*`, []string{"show_regs"}},
	{skipReport, `__show_regs`, []string{"__show_regs"}},
	{skipReport, `dump_backtrace\w*`, []string{"dump_backtrace"}},
	{skipReport, `show_trace_log_lvl`, []string{"show_trace_log_lvl"}},
	{skipReport, `show_pte`, []string{"show_pte"}},
	{skipReport, `panic`, []string{"panic"}},
	{skipReport, `nmi_panic`, []string{"nmi_panic"}},
	{skipReport, `__warn\w*`, []string{"__warn"}},
	{skipReport, `warn_slowpath\w*`, []string{"warn_slowpath_fmt"}},
	{skipReport, `report_bug\w*`, []string{"report_bug"}},
	{skipReport, `handle_bug`, []string{"handle_bug"}},
	{skipReport, `fixup_bug`, []string{"fixup_bug"}},
	{skipReport, `bug_handler`, []string{"bug_handler"}},
	{skipReport, `do_error_trap`, []string{"do_error_trap"}},
	{skipReport, `do_trap\w*`, []string{"do_trap"}},
	{skipReport, `do_invalid_op`, []string{"do_invalid_op"}},
	{skipReport, `invalid_op`, []string{"invalid_op"}},
	{skipReport, `exc_\w+`, []string{"exc_page_fault"}},
	{skipReport, `asm_exc_\w+`, []string{"asm_exc_page_fault"}},
	{skipReport, `die`, []string{"die"}},
	{skipReport, `__die\w*`, []string{"__die"}},
	{skipReport, `die_kernel_fault`, []string{"die_kernel_fault"}},
	{skipReport, `oops_\w+`, []string{"oops_begin"}},
	{skipReport, `do_int3\w*`, []string{"do_int3"}},
	{skipReport, `__schedule_bug`, []string{"__schedule_bug"}},
	{skipReport, `print_address_description\w*`, []string{"print_address_description"}},
	{skipReport, `print_report`, []string{"print_report"}},
	{skipReport, `printk\w*`, []string{"printk"}},
	{skipReport, `_printk\w*`, []string{"_printk"}},
	{skipReport, `vprintk\w*`, []string{"vprintk"}},
	{skipReport, `nbcon_\w+`, []string{"nbcon_cpu_emergency_enter"}},
	{skipReport, `console_\w+`, []string{"console_unlock"}},
	{skipReport, `fortify_panic`, []string{"fortify_panic"}},
	{skipReport, `__fortify_panic`, []string{"__fortify_panic"}},
	{skipReport, `__fortify_report`, []string{"__fortify_report"}},
	{skipReport, `check_preemption_disabled`, []string{"check_preemption_disabled"}},
	{skipReport, `debug_smp_processor_id`, []string{"debug_smp_processor_id"}},
	{skipReport, `__this_cpu_preempt_check`, []string{"__this_cpu_preempt_check"}},
	{skipReport, `debug_print_object`, []string{"debug_print_object"}},
	{skipReport, `debug_object_\w+`, []string{"debug_object_activate"}},
	{skipReport, `__debug_object_\w+`, []string{"__debug_object_init"}},
	{skipReport, `debug_check_no_obj_freed`, []string{"debug_check_no_obj_freed"}},
	{skipReport, `__debug_check_no_obj_freed`, []string{"__debug_check_no_obj_freed"}},
	{skipReport, `usercopy_abort`, []string{"usercopy_abort"}},
	{skipReport, `usercopy_warn`, []string{"usercopy_warn"}},
	{skipReport, `kasan_\w+`, []string{"kasan_report"}},
	{skipReport, `__kasan_\w+`, []string{"__kasan_check_read"}},
	{skipReport, `____kasan_\w+`, []string{"____kasan_slab_free"}},
	{skipReport, `check_memory_region\w*`, []string{"check_memory_region"}},
	{skipReport, `__asan_\w+`, []string{"__asan_load8"}},
	{skipReport, `__hwasan_\w+`, []string{"__hwasan_load8_noabort"}},
	{skipReport, `kmsan_\w+`, []string{"kmsan_report"}},
	{skipReport, `__msan_\w+`, []string{"__msan_warning"}},
	{skipReport, `kcsan_\w+`, []string{"kcsan_setup_watchpoint"}},
	{skipReport, `__kcsan_\w+`, []string{"__kcsan_check_access"}},
	{skipReport, `__tsan_\w+`, []string{"__tsan_read8"}},
	{skipReport, `ubsan_\w+`, []string{"ubsan_epilogue"}},
	{skipReport, `__ubsan_\w+`, []string{"__ubsan_handle_out_of_bounds"}},
	{skipReport, `__sanitizer_cov_\w+`, []string{"__sanitizer_cov_trace_pc"}},
	{skipReport, `kfence_\w+`, []string{"kfence_report_error"}},
	{skipReport, `lockdep_rcu_suspicious`, []string{"lockdep_rcu_suspicious"}},
	{skipReport, `unwind_\w+`, []string{"unwind_next_frame"}},
	{skipReport, `__unwind_\w+`, []string{"__unwind_start"}},
	{skipReport, `arch_stack_walk\w*`, []string{"arch_stack_walk"}},
	{skipReport, `stack_trace_\w+`, []string{"stack_trace_save"}},
	{skipReport, `walk_stackframe`, []string{"walk_stackframe"}},
	{skipReport, `notrace_walk_stackframe`, []string{"notrace_walk_stackframe"}},
	{skipReport, `kunwind_\w+`, []string{"kunwind_next"}},
	{skipReport, `do_kunwind`, []string{"do_kunwind"}},
	{skipReport, `arch_trigger_cpumask_backtrace`, []string{"arch_trigger_cpumask_backtrace"}},
	{skipReport, `nmi_cpu_backtrace\w*`, []string{"nmi_cpu_backtrace"}},
	{skipReport, `nmi_trigger_cpumask_backtrace`, []string{"nmi_trigger_cpumask_backtrace"}},
	{skipHelper, `_*mem(?:cpy|move|set|cmp|chr|scan|dup)\w*`, []string{"memcpy", "memcpy_orig", "memset", "__memmove"}},
	{skipHelper, `_*str(?:n?cpy|scpy|lcpy|n?cat|lcat|n?cmp|n?casecmp|n?len|r?chr|nchr|n?str|sep|pbrk|c?spn|n?dup)\w*`, []string{"strlen", "strscpy", "__strnlen_user", "strncmp"}},
	{skipHelper, `_*(?:copy_(?:to|from)|clear)_user\w*`, []string{"_copy_from_user", "copy_to_user", "__clear_user"}},
	{skipHelper, `_*copy_user\w*`, []string{"copy_user_generic", "__copy_user_flushcache"}},
	{skipHelper, `rep_movs_alternative`, []string{"rep_movs_alternative"}},
	{skipHelper, `_*check_object_size`, []string{"__check_object_size", "check_object_size"}},
	{skipHelper, `check_heap_object`, []string{"check_heap_object"}},
	{skipHelper, `__check_heap_object`, []string{"__check_heap_object"}},
	{skipHelper, `_*(?:get|put)_user_(?:nocheck_)?\d+`, []string{"__get_user_8", "put_user_nocheck_4"}},
	{skipHelper, `kfree(?:_(?:sensitive|skb\w*|rcu\w*|const|bulk|call_rcu))?`, []string{"kfree"}},
	{skipHelper, `__kfree\w*`, []string{"__kfree_skb"}},
	{skipHelper, `kvfree\w*`, []string{"kvfree"}},
	{skipHelper, `_*kmalloc(?:_(?:trace|node|large|noprof|slab|reserve|array|caller|track|cache)\w*)?`, []string{"kmalloc_trace", "__kmalloc", "__kmalloc_node_track_caller", "__kmalloc_cache_noprof"}},
	{skipHelper, `kmem_cache_\w+`, []string{"kmem_cache_alloc"}},
	{skipHelper, `_*kmem_cache_\w+`, []string{"__kmem_cache_alloc_node"}},
	{skipHelper, `kvmalloc\w*`, []string{"kvmalloc_node"}},
	{skipHelper, `_*kvmalloc\w*`, []string{"__kvmalloc_node_noprof"}},
	{skipHelper, `kzalloc\w*`, []string{"kzalloc"}},
	{skipHelper, `kcalloc\w*`, []string{"kcalloc"}},
	{skipHelper, `krealloc\w*`, []string{"krealloc"}},
	{skipHelper, `kmemdup\w*`, []string{"kmemdup"}},
	{skipHelper, `kstrdup\w*`, []string{"kstrdup"}},
	{skipHelper, `slab_\w+`, []string{"slab_alloc_node"}},
	{skipHelper, `__slab_\w+`, []string{"__slab_free"}},
	{skipHelper, `___slab_alloc`, []string{"___slab_alloc"}},
	{skipHelper, `do_slab_free`, []string{"do_slab_free"}},
	{skipHelper, `alloc_tagging_slab_\w+_hook`, []string{"alloc_tagging_slab_alloc_hook", "alloc_tagging_slab_free_hook"}},
	{skipHelper, `_*alloc_pages\w*`, []string{"alloc_pages", "__alloc_pages_noprof"}},
	{skipHelper, `_*free_pages\w*`, []string{"free_pages", "__free_pages"}},
	{skipHelper, `_*get_free_pages\w*`, []string{"__get_free_pages", "get_free_pages_noprof"}},
	{skipHelper, `kmemleak_\w+`, []string{"kmemleak_alloc"}},
	{skipHelper, `_*vmalloc\w*`, []string{"vmalloc", "__vmalloc_node_range"}},
	{skipHelper, `vfree`, []string{"vfree"}},
	{skipHelper, `qlist_free_all`, []string{"qlist_free_all"}},
	{skipHelper, `refcount_\w+`, []string{"refcount_warn_saturate"}},
	{skipHelper, `__refcount_\w+`, []string{"__refcount_add"}},
	{skipHelper, `kref_\w+`, []string{"kref_put"}},
	{skipHelper, `__list_\w+`, []string{"__list_add"}},
	{skipHelper, `list_\w+`, []string{"list_add"}},
	{skipHelper, `__hlist_\w+`, []string{"__hlist_del"}},
	{skipHelper, `hlist_\w+`, []string{"hlist_add_head"}},
	{skipHelper, `__list_add_valid\w*`, []string{"__list_add_valid"}},
	{skipHelper, `__list_del_entry_valid\w*`, []string{"__list_del_entry_valid"}},
	{skipHelper, `rb_(?:erase\w*|insert_color\w*|first\w*|last|next|next_postorder|prev|replace_node\w*|add_cached|find_add\w*)`, []string{"rb_erase"}},
	{skipHelper, `__rb_(?:erase_color|insert_augmented|rotate_set_parents)`, []string{"__rb_erase_color"}},
	{skipHelper, `timerqueue_\w+`, []string{"timerqueue_del"}},
	{skipTrampoline, `__bpf_prog_enter\w*`, []string{"__bpf_prog_enter"}},
	{skipTrampoline, `__bpf_prog_exit\w*`, []string{"__bpf_prog_exit"}},
	{skipTrampoline, `bpf_trampoline_\d+`, []string{"bpf_trampoline_6442491234"}},
	{skipTrampoline, `__bpf_tramp_\w+`, []string{"__bpf_tramp_enter"}},
	{skipTrampoline, `ftrace_caller`, []string{"ftrace_caller"}},
	{skipTrampoline, `ftrace_regs_caller`, []string{"ftrace_regs_caller"}},
	{skipTrampoline, `ftrace_call`, []string{"ftrace_call"}},
	{skipTrampoline, `ftrace_regs_call`, []string{"ftrace_regs_call"}},
	{skipTrampoline, `ftrace_graph_call\w*`, []string{"ftrace_graph_call"}},
	{skipTrampoline, `ftrace_graph_caller`, []string{"ftrace_graph_caller"}},
	{skipTrampoline, `return_to_handler`, []string{"return_to_handler"}},
	{skipTrampoline, `ftrace_stub\w*`, []string{"ftrace_stub"}},
	{skipTrampoline, `arch_ftrace_ops_list_func`, []string{"arch_ftrace_ops_list_func"}},
	{skipTrampoline, `ftrace_ops_list_func`, []string{"ftrace_ops_list_func"}},
	{skipTrampoline, `ftrace_ops_assist_func`, []string{"ftrace_ops_assist_func"}},
	{skipTrampoline, `__fentry__`, []string{"__fentry__"}},
	{skipTrampoline, `call_direct_funcs`, []string{"call_direct_funcs"}},
	{skipHelper, `lock_acquire\w*`, []string{"lock_acquire"}},
	{skipHelper, `__lock_acquire\w*`, []string{"__lock_acquire"}},
	{skipHelper, `lock_release`, []string{"lock_release"}},
	{skipHelper, `__lock_release`, []string{"__lock_release"}},
	{skipHelper, `lock_acquired`, []string{"lock_acquired"}},
	{skipHelper, `lock_contended`, []string{"lock_contended"}},
	{skipContext, `mark_lock\w*`, []string{"mark_lock"}},
	{skipContext, `mark_usage`, []string{"mark_usage"}},
	{skipContext, `valid_state`, []string{"valid_state"}},
	{skipContext, `print_usage_bug`, []string{"print_usage_bug"}},
	{skipContext, `print_circular_bug\w*`, []string{"print_circular_bug"}},
	{skipContext, `print_deadlock_bug`, []string{"print_deadlock_bug"}},
	{skipContext, `print_unlock_imbalance_bug`, []string{"print_unlock_imbalance_bug"}},
	{skipContext, `print_freed_lock_bug`, []string{"print_freed_lock_bug"}},
	{skipContext, `print_held_locks_bug`, []string{"print_held_locks_bug"}},
	{skipContext, `check_noncircular`, []string{"check_noncircular"}},
	{skipContext, `check_prev_add`, []string{"check_prev_add"}},
	{skipContext, `check_prevs_add`, []string{"check_prevs_add"}},
	{skipContext, `validate_chain`, []string{"validate_chain"}},
	{skipContext, `check_deadlock`, []string{"check_deadlock"}},
	{skipContext, `check_usage\w*`, []string{"check_usage"}},
	{skipContext, `check_irq_usage`, []string{"check_irq_usage"}},
	{skipContext, `register_lock_class`, []string{"register_lock_class"}},
	{skipContext, `assign_lock_key`, []string{"assign_lock_key"}},
	{skipContext, `look_up_lock_class`, []string{"look_up_lock_class"}},
	{skipContext, `trace_hardirqs_(?:on|off)\w*`, []string{"trace_hardirqs_on", "trace_hardirqs_off_finish"}},
	{skipContext, `lockdep_\w+`, []string{"lockdep_init_map_type"}},
	{skipContext, `debug_check_no_locks\w*`, []string{"debug_check_no_locks_freed"}},
	{skipContext, `__debug_check_no_locks\w*`, []string{"__debug_check_no_locks"}},
	{skipContext, `debug_locks_off\w*`, []string{"debug_locks_off"}},
	{skipContext, `_raw_\w+`, []string{"_raw_spin_lock_irqsave"}},
	{skipContext, `__raw_\w+`, []string{"__raw_spin_lock"}},
	{skipContext, `do_raw_\w+`, []string{"do_raw_spin_lock"}},
	{skipContext, `queued_\w+`, []string{"queued_spin_lock_slowpath"}},
	{skipContext, `native_queued_\w+`, []string{"native_queued_spin_lock_slowpath"}},
	{skipContext, `__pv_queued_\w+`, []string{"__pv_queued_spin_lock_slowpath"}},
	{skipContext, `rt_spin_\w+`, []string{"rt_spin_lock"}},
	{skipContext, `rt_mutex_\w+`, []string{"rt_mutex_slowlock"}},
	{skipContext, `__rt_mutex_\w+`, []string{"__rt_mutex_slowlock_locked"}},
	{skipContext, `mutex_lock\w*`, []string{"mutex_lock"}},
	{skipContext, `__mutex_lock\w*`, []string{"__mutex_lock"}},
	{skipContext, `mutex_unlock`, []string{"mutex_unlock"}},
	{skipContext, `__mutex_unlock\w*`, []string{"__mutex_unlock_slowpath"}},
	{skipContext, `mutex_trylock`, []string{"mutex_trylock"}},
	{skipContext, `down`, []string{"down"}},
	{skipContext, `down_\w+`, []string{"down_read"}},
	{skipContext, `__down\w*`, []string{"__down_common"}},
	{skipContext, `up_\w+`, []string{"up_read"}},
	{skipContext, `rwsem_\w+`, []string{"rwsem_down_read_slowpath"}},
	{skipContext, `__rwsem_\w+`, []string{"__rwsem_down_write_failed_common"}},
	{skipContext, `percpu_down_\w+`, []string{"percpu_down_write"}},
	{skipContext, `lock_sock`, []string{"lock_sock"}},
	{skipContext, `lock_sock_nested`, []string{"lock_sock_nested"}},
	{skipContext, `__switch_to\w*`, []string{"__switch_to"}},
	{skipContext, `__schedule`, []string{"__schedule"}},
	{skipContext, `schedule`, []string{"schedule"}},
	{skipContext, `schedule_timeout\w*`, []string{"schedule_timeout"}},
	{skipContext, `schedule_preempt_disabled`, []string{"schedule_preempt_disabled"}},
	{skipContext, `io_schedule\w*`, []string{"io_schedule"}},
	{skipContext, `preempt_schedule\w*`, []string{"preempt_schedule"}},
	{skipContext, `__cond_resched`, []string{"__cond_resched"}},
	{skipContext, `_cond_resched`, []string{"_cond_resched"}},
	{skipContext, `__might_sleep`, []string{"__might_sleep"}},
	{skipContext, `___might_sleep`, []string{"___might_sleep"}},
	{skipContext, `__might_resched`, []string{"__might_resched"}},
	{skipContext, `might_sleep`, []string{"might_sleep"}},
	{skipContext, `__might_fault`, []string{"__might_fault"}},
	{skipContext, `__wait_for_common`, []string{"__wait_for_common"}},
	{skipContext, `wait_for_common\w*`, []string{"wait_for_common"}},
	{skipContext, `wait_for_completion\w*`, []string{"wait_for_completion"}},
	{skipContext, `do_wait_for_common`, []string{"do_wait_for_common"}},
	{skipContext, `__flush_work`, []string{"__flush_work"}},
	{skipContext, `flush_work`, []string{"flush_work"}},
	{skipContext, `__wait_on_bit\w*`, []string{"__wait_on_bit"}},
	{skipContext, `out_of_line_wait_on_bit\w*`, []string{"out_of_line_wait_on_bit"}},
	{skipContext, `bit_wait\w*`, []string{"bit_wait"}},
	{skipContext, `folio_wait\w*`, []string{"folio_wait"}},
	{skipContext, `__folio_lock\w*`, []string{"__folio_lock"}},
	{skipContext, `wait_on_page\w*`, []string{"wait_on_page"}},
	{skipContext, `__lock_page\w*`, []string{"__lock_page"}},
	{skipContext, `__sysvec_\w+`, []string{"__sysvec_apic_timer_interrupt"}},
	{skipContext, `sysvec_\w+`, []string{"sysvec_apic_timer_interrupt"}},
	{skipContext, `asm_sysvec_\w+`, []string{"asm_sysvec_apic_timer_interrupt"}},
	{skipContext, `asm_common_interrupt`, []string{"asm_common_interrupt"}},
	{skipContext, `common_interrupt\w*`, []string{"common_interrupt"}},
	{skipContext, `irq_exit\w*`, []string{"irq_exit"}},
	{skipContext, `__irq_exit_rcu`, []string{"__irq_exit_rcu"}},
	{skipContext, `handle_softirqs`, []string{"handle_softirqs"}},
	{skipContext, `__do_softirq`, []string{"__do_softirq"}},
	{skipContext, `do_softirq\w*`, []string{"do_softirq"}},
	{skipContext, `__local_bh_enable_ip`, []string{"__local_bh_enable_ip"}},
	{skipContext, `hrtimer_\w+`, []string{"hrtimer_interrupt"}},
	{skipContext, `__hrtimer_\w+`, []string{"__hrtimer_run_queues"}},
	{skipContext, `tick_\w+`, []string{"tick_sched_timer"}},
	{skipContext, `update_process_times`, []string{"update_process_times"}},
	{skipContext, `rcu_sched_clock_irq`, []string{"rcu_sched_clock_irq"}},
	{skipContext, `rcu_check_callbacks`, []string{"rcu_check_callbacks"}},
	{skipContext, `rcu_pending`, []string{"rcu_pending"}},
	{skipContext, `print_cpu_stall\w*`, []string{"print_cpu_stall"}},
	{skipContext, `print_other_cpu_stall\w*`, []string{"print_other_cpu_stall"}},
	{skipContext, `rcu_dump_cpu_stacks`, []string{"rcu_dump_cpu_stacks"}},
	{skipContext, `sched_show_task\w*`, []string{"sched_show_task"}},
	{skipContext, `_sched_show_task`, []string{"_sched_show_task"}},
	{skipContext, `watchdog_timer_fn\w*`, []string{"watchdog_timer_fn"}},
	{skipContext, `watchdog_overflow_callback\w*`, []string{"watchdog_overflow_callback"}},
	{skipContext, `smp_apic_timer_interrupt\w*`, []string{"smp_apic_timer_interrupt"}},
	{skipContext, `apic_timer_interrupt\w*`, []string{"apic_timer_interrupt"}},
	{skipContext, `local_apic_timer_interrupt`, []string{"local_apic_timer_interrupt"}},
	{skipContext, `el1_interrupt`, []string{"el1_interrupt"}},
	{skipContext, `el1h_64_irq\w*`, []string{"el1h_64_irq"}},
	{skipContext, `gic_handle_irq`, []string{"gic_handle_irq"}},
	{skipContext, `el1_abort`, []string{"el1_abort"}},
	{skipContext, `el1_sync\w*`, []string{"el1_sync"}},
	{skipContext, `el1h_64_sync\w*`, []string{"el1h_64_sync"}},
	{skipContext, `do_mem_abort`, []string{"do_mem_abort"}},
	{skipContext, `__do_kernel_fault`, []string{"__do_kernel_fault"}},
	{skipContext, `do_tag_check_fault`, []string{"do_tag_check_fault"}},
	{skipContext, `handle_exception`, []string{"handle_exception"}},
	{skipContext, `do_irq`, []string{"do_irq"}},
	{skipContext, `handle_riscv_irq`, []string{"handle_riscv_irq"}},
	{skipContext, `riscv_intc_irq`, []string{"riscv_intc_irq"}},
	{skipContext, `do_page_fault`, []string{"do_page_fault"}},
	{skipContext, `handle_page_fault`, []string{"handle_page_fault"}},
	{skipContext, `no_context`, []string{"no_context"}},
	{skipReport, `warn_alloc\w*`, []string{"warn_alloc"}},
	{skipReport, `warn_bogus\w*`, []string{"warn_bogus_irq_restore"}},
	{skipHelper, `_*\w+_panic`, []string{"skb_panic"}},
	{skipReport, `\w*assertfail`, []string{"assertfail"}},
	{skipReport, `print_tainted`, []string{"print_tainted"}},
	{skipReport, `(?:print_)?hex_dump\w*`, []string{"print_hex_dump"}},
	{skipReport, `stack_trace_consume_entry\w*`, []string{"stack_trace_consume_entry"}},
	{skipReport, `(?:timer|work)_is_static_object`, []string{"timer_is_static_object"}},
	{skipHelper, `__x86_indirect_\w*thunk_\w+`, []string{"__x86_indirect_thunk_rax"}},
	{skipHelper, `v?sn?printf|v?scnprintf|kv?asprintf|string|pointer|va_format`, []string{"snprintf"}},
	{skipHelper, `\w*atomic(?:64)?_(?:dec|inc|read|set|or|xor|and|add|sub|fetch|xchg|cmpxchg|try)\w*`, []string{"atomic_dec_and_test"}},
	{skipHelper, `\w*(?:set|clear|change|test)_bit\w*`, []string{"test_and_clear_bit"}},
	{skipHelper, `__wake_up\w*`, []string{"__wake_up_common"}},
	{skipHelper, `ref_tracker\w*`, []string{"ref_tracker_free"}},
	{skipHelper, `kobject_\w+`, []string{"kobject_put"}},
	{skipHelper, `add_uevent_var|get_device_parent|device_(?:add|del|unregister|destroy|release|for_each_child|remove_file)|put_device|devres_release_all`, []string{"device_del"}},
	{skipHelper, `hwrng_unregister|i2c_del_adapter|__unregister_client|rollback_registered\w*|unregister_netdev\w*|tty_unregister_device|sysfs_remove\w*`, []string{"rollback_registered_many"}},
	{skipHelper, `usb_kill_urb|usb_kill_anchored_urbs|usb_control_msg|usb_hcd_submit_urb|usb_submit_urb|dummy_urb_enqueue`, []string{"usb_submit_urb"}},
	{skipHelper, `\w*(?:read|write)[bwlq]`, []string{"__raw_readb"}},
	{skipHelper, `logic_(?:in|out)\w*`, []string{"logic_inb"}},
	{skipHelper, `crc\d+\w*|crc_itu_t`, []string{"crc_itu_t"}},
	{skipHelper, `iput|iput_final|ihold|\w*dput`, []string{"fast_dput"}},
	{skipHelper, `klist_\w+`, []string{"klist_next"}},
	{skipHelper, `ida_free|rhashtable_lookup\w*|xas_(?:start|load|find)\w*|find_lock_entries|truncate_inode_pages_range|__phys_addr|cleanup_srcu_struct|extract_(?:user|iter)_to_sg|drop_nlink|get_taint|mark_buffer_dirty|seqprop_assert|folio_unlock`, []string{"xas_start"}},
	{skipHelper, `kmalloc_order\w*|free_large_kmalloc|_*alloc_frozen_pages\w*|v[mz]alloc\w*`, []string{"kmalloc_order"}},
	{skipHelper, `_*copy_(?:page_|folio_)?(?:to|from)_iter\w*`, []string{"_copy_to_iter"}},
	{skipContext, `del_timer\w*|__timer_delete_sync|timer_delete_sync|lock_timer_base|__mod_timer|sk_stop_timer_sync`, []string{"del_timer_sync"}},
	{skipContext, `__cancel_work_timer|cancel_work_sync|try_to_grab_pending|flush_workqueue|drain_workqueue|destroy_workqueue|queue_work\w*|__queue_work|insert_work|__queue_delayed_work|queue_delayed_work_on|kthread_stop\w*`, []string{"__cancel_work_timer"}},
	{skipContext, `finish_wait|complete`, []string{"finish_wait"}},
	{skipContext, `osq_lock|osq_unlock|mutex_optimistic_spin|owner_on_cpu`, []string{"osq_lock"}},
	{skipContext, `(?:mark|reacquire)_held_locks|lock_is_held_type|(?:un)?lock_page`, []string{"mark_held_locks"}},
	{skipContext, `do_(?:kernel|translation)_fault`, []string{"do_translation_fault"}},
	{skipWait, `irqentry_\w+`, []string{"irqentry_exit", "irqentry_enter"}},
	{skipWait, `ret_from_exception`, []string{"ret_from_exception"}},
	{skipWait, `ret_from_fork\w*`, []string{"ret_from_fork", "ret_from_fork_asm"}},
	{skipWait, `kthread`, []string{"kthread"}},
	{skipWait, `worker_thread`, []string{"worker_thread"}},
	{skipWait, `smpboot_thread_fn`, []string{"smpboot_thread_fn"}},
	{skipWait, `entry_SYSCALL_64\w*`, []string{"entry_SYSCALL_64_after_hwframe"}},
	{skipWait, `do_syscall_64`, []string{"do_syscall_64"}},
	{skipWait, `el0_\w+`, []string{"el0_svc", "el0t_64_sync_handler"}},
	{skipWait, `do_el0_\w+`, []string{"do_el0_svc"}},
	{skipWait, `msleep\w*`, []string{"msleep", "msleep_interruptible"}},
	{skipWait, `usleep_range\w*`, []string{"usleep_range_state"}},
	{skipWait, `ssleep`, []string{"ssleep"}},
	{skipWait, `do_nanosleep`, []string{"do_nanosleep"}},
	{skipWait, `common_nsleep`, []string{"common_nsleep"}},
	{skipWait, `futex_wait\w*`, []string{"futex_wait", "futex_wait_queue"}},
	{skipWait, `__futex_wait`, []string{"__futex_wait"}},
}

// keptFrames look like skipped ones but name real culprits: each must
// survive the whole skip list.
var keptFrames = []string{
	"ftrace_bug", "ftrace_replace_code", "ftrace_modify_all_code", "bpf_trampoline_update", "bpf_trampoline_link_prog",
	"bpf_prog_6deef7357e7b4530_fentry", "blkdev_reread_part", "tipc_bearer_find", "do_read_cache_folio",
	"smp_call_function_many", "memory_bm_find_bit", "memcg_slab_post_alloc_hook", "panic_notifier", "lock_sock_destroy",
	"schedule_work_on", "scheduler_tick", "do_one_initcall", "arch_scale_cpu_capacity", "rb_commit", "rb_reserve_next_event",
	"rb_insert_pages", "__rb_reserve_next", "kmalloc_oob_right", "kfree_via_rcu_test", "strp_data_ready", "stream_open", "__get_user_pages", "get_user_pages_fast",
	"update_curr_dl_se", "bcsp_close", "x25_kill_by_neigh", "up", "rcu_read_unlock_special",
	"dsleep_write", "fth_target_hot", "downgrade_write", "simple_xattr_alloc",
}

func TestSkipListTable(t *testing.T) {
	entries, err := parseSkipList(skipFramesData)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(skipCases) {
		t.Errorf("skipframes.txt has %d entries, skipCases %d: every entry needs its case, in order", len(entries), len(skipCases))
	}
	for i, e := range entries {
		if i >= len(skipCases) {
			t.Errorf("line %d: %s %s has no case", e.line, e.class, e.expr)
			continue
		}
		c := skipCases[i]
		t.Run(e.expr, func(t *testing.T) {
			if c.expr != e.expr || c.class != e.class {
				t.Fatalf("case %d is %s %q, skipframes.txt line %d is %s %q", i, c.class, c.expr, e.line, e.class, e.expr)
			}
			own := regexp.MustCompile(`^(?:` + e.expr + `)$`)
			for _, fn := range c.match {
				if !own.MatchString(fn) {
					t.Errorf("%q does not match its entry", fn)
				}
				if !WaitFrame(fn) && (e.class == skipWait || e.class == skipContext) {
					t.Errorf("WaitFrame(%q) = false", fn)
				}
				if e.class == skipWait {
					// Never in a title: a stall is named through them.
					if skippedFrame(fn) && !matchesOtherClass(entries, fn, skipWait) {
						t.Errorf("skippedFrame(%q) = true for a wait frame", fn)
					}
					return
				}
				if !skippedFrame(fn) {
					t.Errorf("skippedFrame(%q) = false", fn)
				}
				// Only the context class is kept as a faulting IP.
				if got, want := rules.skipFault.MatchString(fn), e.class != skipContext || matchesOtherClass(entries, fn, skipContext); got != want {
					t.Errorf("skipFault(%q) = %v, want %v", fn, got, want)
				}
				if got, want := rules.trampoline.MatchString(fn), e.class == skipTrampoline; got != want && !matchesOtherClass(entries, fn, e.class) {
					t.Errorf("trampoline(%q) = %v, want %v", fn, got, want)
				}
			}
		})
	}
	for _, fn := range keptFrames {
		if skippedFrame(fn) {
			t.Errorf("skippedFrame(%q) = true: a real culprit would never be named", fn)
		}
	}
}

// matchesOtherClass reports whether fn matches an entry of a class other
// than not.
func matchesOtherClass(entries []skipEntry, fn string, not skipClass) bool {
	for _, e := range entries {
		if e.class != not && regexp.MustCompile(`^(?:`+e.expr+`)$`).MatchString(fn) {
			return true
		}
	}
	return false
}

func TestParseSkipListErrors(t *testing.T) {
	for _, bad := range []string{
		"report dump_stack",               // no reason
		"report dump_stack extra # why",   // two regexps
		"frobnicate dump_stack # why",     // unknown class
		"report dump_stack( # unbalanced", // bad regexp
	} {
		if _, err := parseSkipList(bad); err == nil || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("parseSkipList(%q) = %v, want an error naming line 1", bad, err)
		}
	}
}
